"""The state stays exact after a rejected change: a cold start does not retry what the gates turned
down (the automatic rollback leaves the change in the file), and the phase clears once the file
matches what serves again. Through the real `Supervisor.run` with scripted engines."""

from __future__ import annotations

from pathlib import Path

from launcher.state.store import StateStore
from launcher.supervisor.history import Event
from tests.engine_double import ScriptedEngines, passes, rejected_by
from tests.unit.test_supervisor_decisions import Box, box_with, without_stops


def reject_once(tmp_path: Path) -> tuple[Box, str, str]:
    """Promote a launch, then a change the gates reject: the file keeps the change."""
    box = box_with(tmp_path, passes(), rejected_by("tool_call", "auto: no tool call"), passes())
    good = box.write()
    box.then(box.reload(max_num_seqs=8), box.stop)
    assert box.run() == 3
    bad = box.write(max_num_seqs=8)
    assert StateStore(box.state).rejected("svc")[bad]["reason"].endswith("auto: no tool call")
    return box, good, bad


def test_a_cold_start_of_a_rejected_launch_serves_last_good_and_says_why(tmp_path: Path) -> None:
    box, good, bad = reject_once(tmp_path)
    box.engines = ScriptedEngines(passes())  # only last-good may start
    before = len(box.history())
    box.then(box.stop)
    assert box.run() == 3
    events = [str(r["event"]) for r in box.history()[before:]]
    assert without_stops(events) == ["rejected", "rollback", "start", "gates", "serving_last_good", "stopped"]
    reason = box.record(Event.ROLLBACK)["reason"]
    assert box.history()[before + 1]["reason"].startswith(f"candidate svc@{bad} was rejected before (")
    assert "--retry-rejected` tries it again" in box.history()[before + 1]["reason"] and reason
    assert box.engines.latest.argv.count("--max-num-seqs") == 1
    assert box.last_good() == good


def test_retry_rejected_tries_the_candidate_again(tmp_path: Path) -> None:
    box, _, bad = reject_once(tmp_path)
    box.engines = ScriptedEngines(passes())
    box.retry_rejected = True
    box.then(box.stop)
    assert box.run() == 0
    assert box.last_good() == bad
    assert bad not in StateStore(box.state).rejected("svc")  # promoted: forgotten


def test_the_phase_clears_once_the_file_matches_what_serves(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), rejected_by("tool_call", "auto: no tool call"), passes())
    box.write()

    def put_the_file_back() -> None:  # what `launch rollback` does to the file, then its reload
        box.write()
        box.reload()()

    box.then(box.reload(max_num_seqs=8), put_the_file_back, box.stop)
    assert box.run() == 0  # stopped serving what the file says: no longer last-good (which exits 3)
    assert box.record(Event.RELOAD_NOOP)["reason"].startswith("already serving")
    assert box.status()["rollback_reason"] is None
    assert (
        len(box.engines.started) == 3
    )  # production, the candidate, last-good: the file put back started none


def test_a_corrupt_rejected_list_is_kept_aside_and_the_changed_launch_is_not_retried(tmp_path: Path) -> None:
    """Was: `except BadInput: return None`, a corrupt list retried whatever it named. Now the file is
    kept aside, the start says so and serves last-good, and the list names the candidate from now on."""
    box = box_with(tmp_path, passes(), passes())
    good = box.write()
    box.then(box.stop)
    assert box.run() == 0
    changed = box.write(max_num_seqs=8)
    store = StateStore(box.state)
    store.rejected_path("svc").write_text('{"' + changed + '": 5}')  # an entry of the wrong type
    before = len(box.history())
    box.then(box.stop)
    assert box.run() == 3
    assert box.last_good() == good and box.engines.latest.argv.count("--max-num-seqs") == 1
    reason = box.record(Event.ROLLBACK)["reason"]
    assert reason.startswith(f"candidate svc@{changed} is not known to have passed (state file ")
    assert "rejected.json is corrupt (an entry is not an object); kept as rejected.json.corrupt-" in reason
    assert "--retry-rejected` tries it again" in reason
    assert [p.read_text() for p in store.set_aside_files("svc")] == ['{"' + changed + '": 5}']
    assert store.rejected("svc")[changed]["reason"].startswith("not known to have passed (")
    assert without_stops([str(r["event"]) for r in box.history()[before:]])[:2] == ["rejected", "rollback"]


def test_a_corrupt_rejected_list_with_nothing_else_to_serve_is_said_and_the_candidate_tried(
    tmp_path: Path,
) -> None:
    box = box_with(tmp_path, passes())
    fingerprint = box.write()
    StateStore(box.state).rejected_path("svc").parent.mkdir(parents=True, exist_ok=True)
    StateStore(box.state).rejected_path("svc").write_text("{torn")
    box.then(box.stop)
    assert box.run() == 0
    assert box.last_good() == fingerprint
    kept = StateStore(box.state).set_aside_files("svc")
    assert len(kept) == 1 and "rejected launches unknown: state file " in box.progress.getvalue()
    assert f"kept as {kept[0].name}" in box.progress.getvalue()
