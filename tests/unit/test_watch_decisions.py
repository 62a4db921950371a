"""What the serve loop does with the serving watch's verdicts, through the real `Supervisor.run`
with a scripted engine, scripted gate reports and a scripted watch (tests/engine_double.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.profile.candidate import Candidate
from launcher.supervisor.history import Event
from launcher.supervisor.watchdog import Watchdog
from launcher.watch.verdict import Check, Judgement, Verdict
from tests.engine_double import ScriptedWatches, passes, rejected_by
from tests.supervisor_rig import Notices
from tests.unit.test_supervisor_decisions import box_with, without_stops

STOPPED_CORE = "VLLM::EngineCore pid 4242 is stopped (state T)"
WEDGED = Judgement(Verdict.WEDGED, Check.CANARY, "canary: no answer within 10 s (2 in a row)",
                   {"misses": 2}, process=STOPPED_CORE)  # fmt: skip
FAILING = Judgement(Verdict.FAILING, Check.CANARY, "canary: HTTP 500: Internal Server Error (2 in a row)")
LEAK = Judgement(Verdict.STARVING, Check.LEAK, "GPU memory (NVML) grew 3+ windows in a row")


def noop() -> None:
    return None


def test_a_wedged_server_is_recorded_with_its_evidence_and_restarted(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), passes())
    box.watches = ScriptedWatches(WEDGED, None)
    box.watches.at_start[2] = box.stop  # once what serves again is watched (a stop at READY may come first)
    fingerprint = box.write()
    box.then(noop, noop)  # promoted; then serving again after the restart
    assert box.run() == 0
    assert without_stops(box.events()) == ["start", "gates", "promoted", "wedged", "start", "gates",
                                           "recovered", "stopped"]  # fmt: skip
    wedged = box.record(Event.WEDGED)
    assert (wedged["verdict"], wedged["check"], wedged["action"]) == ("wedged", "canary", "restart")
    assert wedged["process"] == STOPPED_CORE and wedged["fingerprint"] == fingerprint
    assert wedged["again_within_window"] is False
    assert Path(wedged["incident"]).read_text().startswith("svc ")  # the evidence, kept first
    first, second = box.watches.made
    assert first.evidence == [("wedged", "restart")] and first.stopped
    assert second.started  # what serves again is watched again
    assert box.engines.started[0].stops  # the wedged engine was stopped
    assert box.record(Event.RECOVERED)["how"] == "restart"
    assert box.guard.status(fingerprint).failures == 1  # counted against the launch
    assert any(text.startswith("wedged by canary") for kind, text in box.notices.calls if kind == "status")


def test_judged_bad_again_within_the_window_rolls_back_to_what_served_before(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), passes(), passes(), passes())
    before = box.write()
    box.watches = ScriptedWatches(None, WEDGED, WEDGED, None)
    box.then(box.reload(max_num_seqs=8), noop, noop, box.stop)
    assert box.run() == 3  # stopped while serving last-good
    changed = box.write(max_num_seqs=8)
    again = [r for r in box.history() if r["event"] == Event.WEDGED]
    assert [(r["action"], r["again_within_window"]) for r in again] == [
        ("restart", False),
        ("rollback", True),
    ]
    assert box.last_good() == before != changed  # what served before is last-good again
    rollback = box.record(Event.ROLLBACK)
    assert rollback["reason"].startswith("wedged by canary")
    assert without_stops(box.events())[-3:] == ["gates", "serving_last_good", "stopped"]


def test_on_wedge_log_keeps_serving_and_says_so(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.write(supervisor={"on_wedge": "log"})
    box.watches = ScriptedWatches(WEDGED)
    box.then(noop)
    box.notices.at_status.append(("wedged by canary", box.stop))
    assert box.run() == 0
    assert without_stops(box.events()) == ["start", "gates", "promoted", "wedged", "stopped"]
    assert box.record(Event.WEDGED)["action"] == "log"
    assert len(box.engines.latest.stops) == 1  # only the final stop
    assert box.status()["watch"]["verdict"] == "wedged"


def test_a_restart_that_fails_its_gates_with_nothing_before_it_ends_the_launcher_with_5(
    tmp_path: Path,
) -> None:
    box = box_with(tmp_path, passes(), rejected_by("health", "/health answered 503"))
    box.watches = ScriptedWatches(WEDGED)
    box.then(noop)
    assert box.run() == 5
    assert without_stops(box.events()) == ["start", "gates", "promoted", "wedged", "start", "gates", "failed"]
    status = box.status()
    assert status["phase"] == "failed"
    assert "the restart was rejected by health" in status["detail"]
    assert "nothing was promoted before it" in status["detail"]


def test_failing_with_on_wedge_rollback_goes_back_at_once(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), passes(), passes())
    before = box.write(supervisor={"on_wedge": "rollback"})
    box.watches = ScriptedWatches(None, FAILING, None)
    box.then(box.reload(supervisor={"on_wedge": "rollback"}, max_num_seqs=8), noop, box.stop)
    assert box.run() == 3
    failing = box.record(Event.FAILING)
    assert (failing["action"], failing["check"]) == ("rollback", "canary")
    assert box.last_good() == before
    assert box.events().count("promoted") == 2 and "serving_last_good" in box.events()


def test_a_leak_follows_leak_monitor_rather_than_on_wedge(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.write(supervisor={"leak_monitor": "log"})
    box.watches = ScriptedWatches(LEAK)
    box.then(noop)
    box.notices.at_status.append(("starving by memory_leak", box.stop))
    assert box.run() == 0
    assert box.record(Event.STARVING)["action"] == "log"


def test_a_degraded_verdict_is_recorded_and_changes_nothing(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    degraded = Judgement(Verdict.DEGRADED, Check.PROCESS, STOPPED_CORE, process=STOPPED_CORE)
    box.watches = ScriptedWatches(degraded)
    box.then(noop)
    box.notices.at_status.append(("degraded: process", box.stop))
    assert box.run() == 0
    watch = box.record(Event.WATCH)
    assert (watch["verdict"], watch["check"], watch["process"]) == ("degraded", "process", STOPPED_CORE)
    assert len(box.engines.latest.stops) == 1


def test_systemd_hears_no_watchdog_ping_while_the_watch_says_the_server_does_not_serve(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    notices = Notices()
    candidate = Candidate.from_record({
        "profile": "svc", "fingerprint": "f", "argv": ["vllm", "serve", "m"], "env": {}, "host": "127.0.0.1",
        "port": 1, "gate_order": [], "expect": {"served_model_names": ["m"], "capture_sizes": None},
    })  # fmt: skip
    watchdog = Watchdog(notices)
    assert watchdog.maybe_ping(candidate, lambda: False) is False
    watchdog._next = 0.0
    assert watchdog.maybe_ping(candidate, lambda: True) is True
    assert notices.calls == [("watchdog", "")]


def test_the_watch_speaks_to_the_journal_at_warning_and_err() -> None:
    import io

    from structlog.testing import capture_logs

    from launcher.supervisor.progress import Progress

    with capture_logs() as events:
        progress = Progress(io.StringIO())  # not a TTY: one structured event per line
        for verdict in ("serving", "degraded", "wedged", "failing", "starving"):
            progress.message(f"watch: {verdict}", event=f"watch.{verdict}")
    assert [(e["event"], e["log_level"]) for e in events] == [
        ("watch.serving", "info"), ("watch.degraded", "warning"), ("watch.wedged", "error"),
        ("watch.failing", "error"), ("watch.starving", "error"),
    ]  # fmt: skip
