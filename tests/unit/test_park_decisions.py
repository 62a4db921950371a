"""A change tried beside a sleeping last-good (`park = "sleep"`), through the real `Supervisor.run`
with scripted engines, scripted gate reports and a scripted sleep seam (tests/engine_double.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.errors import PreflightRefused
from launcher.supervisor.history import Event
from tests.engine_double import Script, ScriptedSleeps, passes, rejected_by
from tests.supervisor_rig import PORT
from tests.unit.test_supervisor_decisions import Box, box_with, without_stops

PARK = {"park": "sleep", "park_port": PORT + 1}


def noop() -> None:
    return None


def parked_box(tmp_path: Path, *scripts: Any, **supervisor: Any) -> Box:
    box = box_with(tmp_path, *scripts)
    box.write(supervisor={**PARK, **supervisor})
    return box


def port_of(engine: Any) -> int:
    return int(engine.argv[engine.argv.index("--port") + 1])


def test_a_rejected_change_wakes_the_sleeper_instead_of_a_cold_start(tmp_path: Path) -> None:
    box = parked_box(tmp_path, passes(), rejected_by("tool_call", "auto: no tool call"))
    box.then(box.reload(supervisor=PARK, max_num_seqs=8), box.stop)  # promoted; then woken
    assert box.run() == 3  # stopped while serving last-good
    assert without_stops(box.events()) == ["start", "gates", "promoted", "greedy_reference", "reload", "parked",
                                           "start", "gates", "rejected", "woken", "stopped"]  # fmt: skip
    production, candidate = box.engines.started
    assert "--enable-sleep-mode" in production.argv and production.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert (port_of(production), port_of(candidate)) == (PORT, PORT + 1)  # the sleeper keeps its port
    assert production.stops == [30.0] and candidate.stops  # only the final stop: never restarted
    assert box.sleeps.calls == [("greedy", PORT), ("sleep", PORT), ("is_sleeping", PORT), ("wake", PORT),
                                ("is_sleeping", PORT), ("reset", PORT), ("greedy", PORT)]  # fmt: skip
    assert box.engines.asked == [None, None, frozenset({"health", "tool_call", "smoke", "canary"})]
    status = box.status()
    assert status["phase"] == "stopped" and status["rollback_reason"].endswith("auto: no tool call")
    woken = box.record(Event.WOKEN)
    assert woken["port"] == PORT and isinstance(woken["seconds"], float)
    assert box.preflight.parked_calls[-1] == frozenset({production._pid})  # its residue counted, no 2nd model
    assert f"share {box.engines.started[0].argv and 'last-good' or ''}" not in box.gpu_locks.log
    assert any(entry.startswith("share candidate svc@") for entry in box.gpu_locks.log)


def test_a_promoted_change_stops_the_sleeper_and_serves_on_the_other_port(tmp_path: Path) -> None:
    box = parked_box(tmp_path, passes(), passes(), passes())
    box.then(
        box.reload(supervisor=PARK, max_num_seqs=8), box.reload(supervisor=PARK, max_num_seqs=16), box.stop
    )
    assert box.run() == 0
    first, second, third = box.engines.started
    assert [port_of(e) for e in (first, second, third)] == [PORT, PORT + 1, PORT]  # what serves alternates
    stopped = [r for r in box.history() if r["event"] == Event.ENGINE_STOPPED]
    assert stopped[0]["why"] == "parked engine: the candidate was promoted"
    assert box.events().count("parked") == 2 and "woken" not in box.events()
    assert box.status()["serving_fingerprint"] == box.last_good()


def test_keep_parked_keeps_the_old_engine_asleep_until_the_next_change(tmp_path: Path) -> None:
    box = parked_box(tmp_path, passes(), passes(), keep_parked=True)
    box.then(box.reload(supervisor={**PARK, "keep_parked": True}, max_num_seqs=8), box.stop)
    assert box.run() == 0
    first, _ = box.engines.started
    assert first.stops and first.stops == [30.0]  # stopped once, when the launcher left
    stopped = [r["why"] for r in box.history() if r["event"] == Event.ENGINE_STOPPED]
    assert "parked engine: launcher exiting" in stopped


def test_a_failed_wake_stops_the_sleeper_and_starts_last_good_cold(tmp_path: Path) -> None:
    box = parked_box(tmp_path, passes(), rejected_by("health", "503"), passes())
    box.sleeps.fail["wake"] = "POST /wake_up: no answer within 120 s"
    box.then(box.reload(supervisor=PARK, max_num_seqs=8), box.stop)
    assert box.run() == 3
    failed = box.record(Event.WAKE_FAILED)
    assert failed["reason"] == "POST /wake_up: no answer within 120 s"
    events = without_stops(box.events())
    assert events[events.index("wake_failed"):] == ["wake_failed", "rollback", "start", "gates",
                                                    "serving_last_good", "greedy_reference", "stopped"]  # fmt: skip
    assert len(box.engines.started) == 3 and box.engines.started[0].stops  # the sleeper was stopped


def test_a_woken_engine_that_fails_its_re_gate_is_replaced_by_a_cold_start(tmp_path: Path) -> None:
    sour = Script(regate=(("health", True, "200 OK"), ("tool_call", False, "garbage after wake")))
    box = parked_box(tmp_path, sour, rejected_by("health", "503"), passes())
    box.then(box.reload(supervisor=PARK, max_num_seqs=8), box.stop)
    assert box.run() == 3
    assert box.record(Event.WAKE_FAILED)["reason"] == "re-gate: tool_call: garbage after wake"
    assert "serving_last_good" in box.events()


def test_a_sleep_that_fails_is_reported_and_the_engine_stopped_as_before(tmp_path: Path) -> None:
    box = parked_box(tmp_path, passes(), passes())
    box.sleeps = ScriptedSleeps(sleep="POST /sleep answered 404")
    box.then(box.reload(supervisor=PARK, max_num_seqs=8), box.stop)
    assert box.run() == 0
    skipped = box.record(Event.PARK_SKIPPED)
    assert skipped["reason"] == "sleep failed: POST /sleep answered 404"
    assert port_of(box.engines.started[1]) == PORT  # not moved: the port is free again


def test_the_change_that_turns_park_on_stops_the_engine_that_cannot_sleep(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), passes())
    box.write()  # park = "stop": started without sleep mode
    box.then(box.reload(supervisor=PARK, max_num_seqs=8), box.stop)
    assert box.run() == 0
    assert "parked" not in box.events()
    assert box.sleeps.calls == [("greedy", PORT)]  # the new engine's reference answer: nothing slept
    assert "--enable-sleep-mode" in box.engines.latest.argv  # the next change can park it


def test_sleep_mode_and_the_port_to_alternate_to_are_read_from_the_launch(tmp_path: Path) -> None:
    from launcher.profile.candidate import Candidate
    from launcher.profile.plan import build_plan
    from launcher.supervisor.sleep import can_sleep, other_port

    box = parked_box(tmp_path)
    candidate = Candidate.from_plan(build_plan(box.profiles, "svc"))
    assert can_sleep(candidate) and other_port(candidate) == PORT + 1
    moved = candidate.at_port(PORT + 1)
    assert moved.fingerprint == candidate.fingerprint and moved.base_url.endswith(f":{PORT + 1}")
    assert other_port(moved) == PORT and moved.home_port == PORT
    record = {**candidate.to_record(), "argv": [a for a in candidate.argv if a != "--enable-sleep-mode"]}
    assert not can_sleep(Candidate.from_record(record))  # a launch started before park was on


def test_a_candidate_preflight_refuses_beside_the_sleeper_wakes_it(tmp_path: Path) -> None:
    box = parked_box(tmp_path, passes())
    changed = box.write(supervisor=PARK, max_num_seqs=8)
    box.write(supervisor=PARK)
    box.preflight.refuse_once_stopped[changed] = "GPU 0: free 1.00 GiB < needed"
    box.then(box.reload(supervisor=PARK, max_num_seqs=8), box.stop)
    assert box.run() == 3
    assert box.events().count("start") == 1 and "woken" in box.events()
    assert "refused by preflight" in box.status()["rollback_reason"]
    verdict = box.verdict()  # a host problem, not the change's: exit 4, nothing held against it
    assert verdict is not None and (verdict.outcome, verdict.exit_code) == ("refused", 4)
    assert "rejected" not in box.events() and without_stops(box.events())[-4:] == [
        "parked", "reload_refused", "woken", "stopped"
    ]  # fmt: skip


def test_on_switch_runs_with_the_port_that_serves(tmp_path: Path) -> None:
    seen = tmp_path / "switched.txt"
    hook = ["sh", "-c", f"echo {{profile}} {{port}} {{url}} >> {seen}"]
    box = parked_box(tmp_path, passes(), passes(), on_switch=hook)
    box.then(box.reload(supervisor={**PARK, "on_switch": hook}, max_num_seqs=8), box.stop)
    assert box.run() == 0
    assert seen.read_text().splitlines() == [f"svc {PORT} http://127.0.0.1:{PORT}",  # the first promotion
                                             f"svc {PORT + 1} http://127.0.0.1:{PORT + 1}"]  # fmt: skip
    assert [r["exit_code"] for r in box.history() if r["event"] == Event.SWITCHED] == [0, 0]


def test_preflight_refused_is_still_a_gate_error() -> None:
    assert PreflightRefused("x").exit_code == 4


def control(box: Box, action: str, requester: int) -> Any:
    """A step: what `launch probe` sends (a control request, then SIGHUP); returns a getter of its verdict."""
    import signal

    from launcher.state.store import StateStore
    from launcher.supervisor import reload_requests

    reloads = StateStore(box.state).reloads_dir("svc")
    sent: list[str] = []

    def step() -> None:
        sent.append(reload_requests.ask(reloads, reload_requests.Action(action), requester))
        signal.raise_signal(signal.SIGHUP)

    step.verdicts = lambda: [reload_requests.verdict(reloads, rid) for rid in sent]  # type: ignore[attr-defined]
    return step


def test_a_probe_parks_production_lends_its_gpus_and_wakes_it(tmp_path: Path) -> None:
    import os

    box = parked_box(tmp_path, passes())
    park, wake = control(box, "park", os.getpid()), control(box, "wake", os.getpid())
    box.then(park, box.stop)  # promoted: park it; woken: stop
    box.notices.at_status.append(("asleep, its GPUs lent to launch probe", wake))
    assert box.run() == 0
    [parked] = park.verdicts()
    assert parked.outcome == "parked" and parked.data["port"] == PORT + 1
    assert parked.data["pids"] == [box.engines.latest._pid]
    [woken] = wake.verdicts()
    assert woken.outcome == "woken" and woken.detail.startswith("woken in ")
    assert without_stops(box.events())[3:] == ["greedy_reference", "parked", "woken", "stopped"]
    assert len(box.engines.started) == 1  # never restarted
    takes = [entry for entry in box.gpu_locks.log if entry.startswith("take ")]
    releases = [entry for entry in box.gpu_locks.log if entry.startswith("release ")]
    assert len(takes) == 2 and len(releases) == 2  # given back while lent, taken again to serve


def test_a_parked_engine_wakes_by_itself_when_the_probe_is_gone(tmp_path: Path) -> None:
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    box = parked_box(tmp_path, passes())
    box.then(control(box, "park", gone.pid), box.stop)
    assert box.run() == 0
    assert box.record(Event.WOKEN)["why"] == f"launch probe pid {gone.pid} is gone"


def test_a_reload_while_lent_is_refused(tmp_path: Path) -> None:
    import os

    box = parked_box(tmp_path, passes())
    park, wake = control(box, "park", os.getpid()), control(box, "wake", os.getpid())
    box.then(park, box.stop)
    from launcher.state.store import StateStore
    from launcher.supervisor import reload_requests

    def ask_a_reload() -> None:  # while the park is being answered: that SIGHUP's reload takes it too
        box.write(supervisor=PARK, max_num_seqs=8)
        box.requests.append(reload_requests.request(StateStore(box.state).reloads_dir("svc")))

    box.notices.at_status.append(("asleep, its GPUs lent to launch probe", ask_a_reload))
    box.notices.at_status.append(("reload refused: the engine is parked", wake))
    assert box.run() == 0
    verdict = box.verdict()
    assert verdict is not None and verdict.outcome == "refused"
    assert f"parked for launch probe pid {os.getpid()}" in verdict.detail
    assert len(box.engines.started) == 1


def test_a_rollback_to_the_launch_kept_asleep_wakes_it_and_puts_the_other_to_sleep(tmp_path: Path) -> None:
    keep = {**PARK, "keep_parked": True}
    box = parked_box(tmp_path, passes(), passes(), keep_parked=True)
    first = box.write(supervisor=keep)
    box.then(box.reload(supervisor=keep, max_num_seqs=8), box.reload(supervisor=keep), box.stop)
    assert box.run() == 0
    assert len(box.engines.started) == 2  # the way back started nothing
    woken = [r for r in box.history() if r["event"] == Event.WOKEN]
    assert woken[-1]["why"] == "back to the parked launch" and woken[-1]["port"] == PORT
    assert box.last_good() == first
    parked = [r for r in box.history() if r["event"] == Event.PARKED]
    assert [r["port"] for r in parked] == [PORT, PORT + 1]  # each in turn asleep on its own port
    assert box.status()["serving_fingerprint"] == first


def test_a_way_back_whose_wake_fails_starts_the_launch_beside_the_new_sleeper(tmp_path: Path) -> None:
    keep = {**PARK, "keep_parked": True}
    box = parked_box(tmp_path, passes(), passes(), passes(), keep_parked=True)
    box.write(supervisor=keep)
    back = box.reload(supervisor=keep)

    def fail_the_wake_and_go_back() -> None:
        box.sleeps.fail["wake"] = "POST /wake_up answered 500"
        back()

    box.then(box.reload(supervisor=keep, max_num_seqs=8), fail_the_wake_and_go_back, box.stop)
    assert box.run() == 0
    failed = [r for r in box.history() if r["event"] == Event.WAKE_FAILED]
    assert failed and failed[0]["reason"] == "POST /wake_up answered 500"
    third = box.engines.started[-1]
    assert len(box.engines.started) == 3 and port_of(third) == PORT  # the new sleeper keeps PORT + 1
