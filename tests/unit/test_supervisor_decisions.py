"""The supervisor's decisions in milliseconds: the real `Supervisor.run` (profile lock, state dir,
status board, history, reload requests, the real restart guard, real signals to this process)
with the engine seam played by a scripted engine and scripted gate reports (tests/engine_double.py).

The real-process tests (tests/integration/test_supervisor*.py, test_reload_keeps_serving.py) prove
the wiring with `vllm-sim`; these prove each decision and what it writes.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from launcher.errors import BadInput, PreflightRefused
from launcher.host.restart_guard import RestartGuard
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor import reload_requests
from launcher.supervisor.history import Event, History
from launcher.supervisor.progress import Progress
from launcher.supervisor.reload_requests import Outcome, Verdict
from launcher.supervisor.seams import Execute, Hooks
from launcher.supervisor.service import Supervisor
from launcher.supervisor.status import read_status
from tests.engine_double import ScriptedEngines, ScriptedSleeps, fails_to_start, passes, rejected_by
from tests.launcher_run import write_profile
from tests.supervisor_rig import PORT, GpuLocks, Notices, Preflight, Terminal

DEADLINE_S = 20.0  # a decision that never comes ends the run with a SIGTERM, and the test fails
KV_LINE = "INFO 11-29 06:26:59 [kv_cache_utils.py:1147] GPU KV cache size: 180,224 tokens"


class Box:
    """One profile `svc` in a scratch state dir, run by the real supervisor over the seam."""

    def __init__(self, tmp: Path, engines: ScriptedEngines) -> None:
        self.profiles = tmp / "profiles"
        self.profiles.mkdir()
        self.state = tmp / "state"
        self.engines = engines
        self.notices = Notices()
        self.preflight = Preflight()
        self.gpu_locks = GpuLocks()
        self.guard = RestartGuard(StateStore(self.state), "svc", max_failures=2, window_s=600.0)
        self.progress = Terminal()
        self.requests: list[str] = []
        self.watches: Any = None  # a serving-watch factory (tests/engine_double.py ScriptedWatches)
        self.sleeps = ScriptedSleeps()  # the sleep seam (park = "sleep")
        self.retry_rejected = False
        self.write()

    @property
    def profile_dir(self) -> Path:
        return self.state / "profiles" / "svc"

    def write(self, supervisor: dict[str, Any] | None = None, **args: Any) -> str:
        """Write the profile; returns its fingerprint."""
        write_profile(self.profiles, "svc", PORT, args=args, supervisor=supervisor)
        return build_plan(self.profiles, "svc").fingerprint()

    def run(self) -> int:
        hooks = Hooks(
            preflight=self.preflight,
            notifier=self.notices,
            restart_guard=lambda _: self.guard,
            gpu_locks=self.gpu_locks,
            watch=self.watches,
        )
        supervisor = Supervisor(
            GlobalOptions(self.profiles, self.state),
            "svc",
            hooks=hooks,
            progress=Progress(self.progress, notifier=self.notices),
            execute=Execute(engine=self.engines, gates=self.engines.report, sleep=self.sleeps),
            retry_rejected=self.retry_rejected,
        )
        overdue = threading.Event()

        def past_deadline() -> None:  # what the signal handler does with a SIGTERM
            overdue.set()
            supervisor.inbox._record(signal.SIGTERM, None)

        timer = threading.Timer(DEADLINE_S, past_deadline)
        timer.start()
        try:
            code = supervisor.run()
        finally:
            timer.cancel()
        assert not overdue.is_set(), f"no decision within {DEADLINE_S:g} s"
        assert not self.notices.at_ready, "a scripted step was never reached"
        assert not self.notices.at_status, "a scripted step was never reached"
        return code

    # what a test does at a READY=1
    def then(self, *steps: Callable[[], None]) -> None:
        self.notices.at_ready.extend(steps)

    def stop(self) -> None:
        signal.raise_signal(signal.SIGTERM)

    def reload(self, **args: Any) -> Callable[[], None]:
        """Edit the profile (unless `args` is empty), then ask for a reload as `launch set --apply` does."""

        def step() -> None:
            if args:
                self.write(**args)
            self.requests.append(reload_requests.request(StateStore(self.state).reloads_dir("svc")))
            signal.raise_signal(signal.SIGHUP)

        return step

    def kill_engine(self) -> None:
        self.engines.latest.die(signal.SIGKILL)

    # what it left
    def events(self) -> list[str]:
        return [str(r["event"]) for r in History(self.state / "history.jsonl").read()]

    def history(self) -> list[dict[str, Any]]:
        return list(History(self.state / "history.jsonl").read())

    def record(self, event: Event) -> dict[str, Any]:
        return next(r for r in History(self.state / "history.jsonl").read() if r["event"] == event)

    def status(self) -> dict[str, Any]:
        found = read_status(self.profile_dir / "status.json")
        assert found is not None
        return found

    def verdict(self) -> Verdict | None:
        return reload_requests.verdict(StateStore(self.state).reloads_dir("svc"), self.requests[-1])

    def last_good(self) -> str | None:
        record = StateStore(self.state).last_good("svc")
        return None if record is None else str(record["fingerprint"])


def without_stops(events: list[str]) -> list[str]:
    return [e for e in events if e != Event.ENGINE_STOPPED]


def box_with(tmp_path: Path, *scripts: Any) -> Box:
    return Box(tmp_path, ScriptedEngines(*scripts))


# ---- promote, stop ----------------------------------------------------------------------------


def test_a_candidate_that_passes_is_promoted_and_a_sigterm_stops_it_with_exit_0(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(KV_LINE))
    fingerprint = box.write()
    box.then(box.stop)
    assert box.run() == 0
    assert box.events() == ["start", "gates", "promoted", "engine_stopped", "stopped"]
    status = box.status()
    assert status["phase"] == "stopped" and status["engine_pid"] is None
    assert status["serving_fingerprint"] == fingerprint == box.last_good()
    assert [g["verdict"] for g in status["gates"]] == ["pass", "pass"]
    assert box.record(Event.START)["engine_pid"] == box.engines.latest._pid
    assert box.record(Event.STOPPED)["signal"] == "SIGTERM"
    assert ("ready", f"serving candidate svc@{fingerprint}") in box.notices.calls
    assert ("status", f"starting: candidate svc@{fingerprint}") in box.notices.calls
    ready = box.notices.calls.index(("ready", f"serving candidate svc@{fingerprint}"))
    assert box.notices.calls.index(("stopping", "")) > ready
    assert box.engines.latest.stops == [30.0]  # stopped once, with the default grace
    assert box.engines.latest.watch_calls == 1  # every process of what serves watched before it serves
    facts = StateStore(box.state).last_facts("svc")
    assert facts is not None and facts["kv_cache_tokens"] == 180224  # the engine's log reached the facts
    assert "phase serving" in box.progress.getvalue()


def test_sigint_stops_like_sigterm(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.then(lambda: signal.raise_signal(signal.SIGINT))
    assert box.run() == 0
    assert box.record(Event.STOPPED)["signal"] == "SIGINT"


def test_a_stop_requested_while_gating_ends_the_start_with_exit_0(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.engines.while_gating.append(box.stop)  # SIGTERM while a gate waits
    assert box.run() == 0
    status = box.status()
    assert status["phase"] == "stopped" and status["detail"] == "stopped by a signal during gating"
    assert without_stops(box.events()) == ["start", "gates", "stopped"]
    assert box.record(Event.STOPPED)["during"] == "gating"
    assert "stopped by a signal" in box.record(Event.GATES)["gates"][0]["summary"]
    assert box.last_good() is None and box.engines.latest.exited.is_set()


# ---- reject, roll back ------------------------------------------------------------------------


def test_rejected_with_no_last_good_exits_1_with_the_gate_s_words(tmp_path: Path) -> None:
    box = box_with(tmp_path, rejected_by("tool_call", "not valid JSON"))
    fingerprint = box.write()
    assert box.run() == 1
    status = box.status()
    assert status["phase"] == "failed" and status["detail"] == "no last-good launch recorded"
    assert status["rollback_reason"] == f"candidate svc@{fingerprint} rejected by tool_call: not valid JSON"
    assert box.events() == ["start", "gates", "engine_stopped", "rejected"]
    assert box.record(Event.REJECTED)["reason"] == status["rollback_reason"]
    assert box.guard.status(fingerprint).failures == 1  # the guard counts the failed start
    assert box.last_good() is None and not any(c[0] == "ready" for c in box.notices.calls)
    assert box.engines.latest.watch_calls == 0  # a rejected engine never serves


def test_a_rejected_candidate_rolls_back_to_last_good_which_serves_until_stopped(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    good = box.write()
    box.then(box.stop)
    assert box.run() == 0
    bad = box.write(max_num_seqs=8)
    box.engines.add(rejected_by("health", "503 Service Unavailable"), passes())
    box.then(box.stop)
    assert box.run() == 3
    status = box.status()
    assert status["phase"] == "stopped" and status["serving_fingerprint"] == good
    reason = f"candidate svc@{bad} rejected by health: 503 Service Unavailable"
    assert status["rollback_reason"] == reason
    assert without_stops(box.events())[4:] == [
        "start",
        "gates",
        "rejected",
        "rollback",
        "start",
        "gates",
        "serving_last_good",
        "stopped",
    ]
    assert box.record(Event.ROLLBACK) | {"ts": None} == {
        "ts": None,
        "event": "rollback",
        "profile": "svc",
        "to": f"last-good svc@{good}",
        "reason": reason,
    }
    assert box.last_good() == good  # a rejected candidate is never recorded
    assert ("ready", f"serving last-good; {reason}") in box.notices.calls
    assert box.engines.started[-1].argv == box.engines.started[0].argv  # last-good as recorded


def test_last_good_that_fails_its_gates_too_exits_1(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.then(box.stop)
    box.run()
    box.write(max_num_seqs=8)
    box.engines.add(rejected_by("health", "503"), rejected_by("health", "503 again"))
    assert box.run() == 1
    status = box.status()
    assert status["phase"] == "failed" and status["detail"] == "last-good failed its gates too"
    assert box.events()[-2:] == ["engine_stopped", "failed"]
    assert box.record(Event.FAILED)["reason"] == "last-good failed its gates too"


# ---- refused before starting ------------------------------------------------------------------


def test_preflight_refusing_the_first_start_exits_4_before_anything_starts(tmp_path: Path) -> None:
    box = box_with(tmp_path)
    fingerprint = box.write()
    box.preflight.refuse[fingerprint] = "port 18123 is in use"
    with pytest.raises(PreflightRefused):
        box.run()
    assert box.engines.started == []
    status = box.status()
    assert status["phase"] == "failed"
    assert status["detail"] == "preflight refused: preflight refused: port 18123 is in use"
    assert box.events() == ["preflight_refused"]


def test_the_restart_guard_refuses_a_candidate_that_keeps_failing_exit_4_with_nothing_to_serve(
    tmp_path: Path,
) -> None:
    box = box_with(tmp_path)
    fingerprint = box.write()
    for _ in range(2):
        box.guard.record_failure(fingerprint, "engine exited with code 1")
    with pytest.raises(PreflightRefused, match="restart guard: candidate svc@"):
        box.run()
    assert box.engines.started == [] and box.events() == ["preflight_refused"]
    assert "not retried" in box.status()["detail"]


def test_the_restart_guard_sends_a_failing_candidate_to_last_good_when_there_is_one(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    good = box.write()
    box.then(box.stop)
    box.run()
    bad = box.write(max_num_seqs=8)
    for _ in range(2):
        box.guard.record_failure(bad, "engine exited with code 1")
    box.engines.add(passes())
    box.then(box.stop)
    assert box.run() == 3
    assert box.status()["serving_fingerprint"] == good
    assert "not retried" in box.record(Event.REJECTED)["reason"]
    assert len(box.engines.started) == 2  # the failing candidate was not started again


def test_an_engine_that_cannot_start_is_an_operator_error_recorded_as_failed(tmp_path: Path) -> None:
    box = box_with(tmp_path, fails_to_start(BadInput("cannot start 'vllm-sim': not found or not executable")))
    with pytest.raises(BadInput):
        box.run()
    status = box.status()
    assert status["phase"] == "failed"
    assert status["detail"] == "cannot start 'vllm-sim': not found or not executable during starting"
    assert box.events() == ["failed"] and box.record(Event.FAILED)["during"] == "starting"


# ---- after promotion --------------------------------------------------------------------------


def test_engine_death_after_promotion_is_recorded_counted_and_exits_5(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    fingerprint = box.write()
    box.then(box.kill_engine)
    assert box.run() == 5
    died = box.record(Event.ENGINE_DIED)
    assert died["how"] == f"API server pid {died['pid']} killed by SIGKILL"
    assert died["process"] == "API server"
    assert isinstance(died["noticed_at_epoch"], float) and "facts" in died
    status = box.status()
    assert status["phase"] == "failed" and status["engine_pid"] is None
    assert status["detail"] == f"engine died after promotion: {died['how']}"
    assert box.events() == ["start", "gates", "promoted", "engine_died", "engine_stopped"]
    assert box.guard.status(fingerprint).failures == 1  # a promoted engine that dies counts too


def test_the_death_of_an_engine_core_names_that_process(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.then(lambda: box.engines.latest.die(signal.SIGKILL, name="VLLM::EngineCore"))
    assert box.run() == 5
    pid = box.engines.latest._pid
    assert box.record(Event.ENGINE_DIED)["how"] == f"VLLM::EngineCore pid {pid} killed by SIGKILL"


# ---- reloads ----------------------------------------------------------------------------------


def test_a_reload_whose_candidate_passes_promotes_it(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), passes())
    box.then(box.reload(max_num_seqs=8), box.stop)
    assert box.run() == 0
    new = build_plan(box.profiles, "svc").fingerprint()
    verdict = box.verdict()
    assert verdict is not None and verdict.down_s is not None and verdict.down_s >= 0  # stopped, then served
    assert dataclasses.replace(verdict, down_s=None) == Verdict(Outcome.PROMOTED, 0, f"serving {new}")
    assert without_stops(box.events()) == [
        "start",
        "gates",
        "promoted",
        "reload",
        "start",
        "gates",
        "promoted",
        "stopped",
    ]
    assert box.engines.started[0].stops and box.last_good() == new
    assert box.status()["reload_seq"] == 1
    assert ("reloading", "") in box.notices.calls


def test_a_reload_rejected_by_the_gates_serves_last_good_and_says_so(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), rejected_by("graph_capture", "fell back to [1, 2]"), passes())
    good = box.write()
    box.then(box.reload(max_num_seqs=8), box.stop)
    assert box.run() == 3
    verdict = box.verdict()
    assert verdict is not None and (verdict.outcome, verdict.exit_code) == (Outcome.ROLLED_BACK, 3)
    assert "rejected by graph_capture: fell back to [1, 2]" in verdict.detail
    assert without_stops(box.events()) == [
        "start",
        "gates",
        "promoted",
        "reload",
        "start",
        "gates",
        "rejected",
        "rollback",
        "start",
        "gates",
        "serving_last_good",
        "stopped",
    ]
    assert box.status()["serving_fingerprint"] == good == box.last_good()


def test_a_reload_that_changes_nothing_restarts_nothing(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    fingerprint = box.write()
    box.then(box.reload(), box.stop)
    assert box.run() == 0
    assert box.verdict() == Verdict(Outcome.UNCHANGED, 0, f"already serving {fingerprint}")
    assert len(box.engines.started) == 1 and box.events()[-3:] == ["reload_noop", "engine_stopped", "stopped"]
    assert box.record(Event.RELOAD_NOOP)["reason"] == f"already serving {fingerprint}"


def test_a_reload_preflight_refuses_keeps_the_engine_serving_exit_4_for_the_requester(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.preflight.refuse[box.write(max_num_seqs=8)] = "port 18123 is in use"
    box.write()
    box.then(box.reload(max_num_seqs=8), box.stop)
    assert box.run() == 0
    detail = "reload refused: preflight refused: port 18123 is in use; still serving"
    assert box.verdict() == Verdict(Outcome.REFUSED, 4, detail)
    serving = box.engines.latest
    assert box.preflight.calls[-1][1] == frozenset({serving._pid})  # judged with what serves counted as free
    assert len(box.engines.started) == 1 and serving.stops == [30.0]  # stopped only by the SIGTERM
    assert box.events()[-3:] == ["reload_refused", "engine_stopped", "stopped"]
    assert box.record(Event.RELOAD_REFUSED)["reason"] == detail
    assert ("ready", detail) in box.notices.calls


def test_a_reload_the_restart_guard_refuses_keeps_the_engine_serving(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    bad = box.write(max_num_seqs=8)
    for _ in range(2):
        box.guard.record_failure(bad, "engine exited with code 1")
    box.write()
    box.then(box.reload(max_num_seqs=8), box.stop)
    assert box.run() == 0
    verdict = box.verdict()
    assert verdict is not None and (verdict.outcome, verdict.exit_code) == (Outcome.REFUSED, 4)
    assert verdict.detail.startswith(f"reload refused: candidate svc@{bad} not retried")
    assert len(box.engines.started) == 1 and box.status()["phase"] == "stopped"


def test_a_reload_of_a_profile_that_does_not_render_keeps_the_engine_serving_exit_2(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())

    def break_profile() -> None:
        (box.profiles / "svc.toml").write_text("[engine\n")
        box.reload()()

    box.then(break_profile, box.stop)
    assert box.run() == 0
    verdict = box.verdict()
    assert verdict is not None and (verdict.outcome, verdict.exit_code) == (Outcome.INVALID, 2)
    assert verdict.detail.startswith("reload refused: ") and verdict.detail.endswith("; still serving")
    assert len(box.engines.started) == 1 and box.events()[-3] == "reload_refused"


def test_an_error_during_a_reload_reaches_the_requester_before_the_launcher_leaves(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), fails_to_start(BadInput("cannot start 'vllm-sim': not found")))
    box.then(box.reload(max_num_seqs=8))
    with pytest.raises(BadInput):
        box.run()
    assert box.verdict() == Verdict(Outcome.FAILED, 2, "cannot start 'vllm-sim': not found")
    assert box.status()["phase"] == "failed" and box.events()[-1] == "failed"


def test_a_reload_preflight_refuses_once_the_engine_stopped_goes_back_to_last_good(tmp_path: Path) -> None:
    """A host problem, not the change's (issue 42): exit 4 for the requester, nothing held against it."""
    box = box_with(tmp_path, passes(), passes())
    good = box.write()
    bad = box.write(max_num_seqs=8)
    box.preflight.refuse_once_stopped[bad] = "port 18123 is in use"  # the old engine's port never came free
    box.write()
    box.then(box.reload(max_num_seqs=8), box.stop)
    assert box.run() == 3
    verdict = box.verdict()
    assert verdict is not None and (verdict.outcome, verdict.exit_code) == (Outcome.REFUSED, 4)
    assert verdict.detail == (
        f"reload refused: candidate svc@{bad} refused by preflight: preflight refused: port 18123 is in use"
    )
    assert verdict.down_s is not None  # what served was stopped, then came back
    assert not StateStore(box.state).rejected("svc") and box.status()["reload_refused"] == 1
    assert without_stops(box.events())[3:] == [
        "reload",
        "reload_refused",
        "rollback",
        "start",
        "gates",
        "serving_last_good",
        "stopped",
    ]
    assert box.status()["serving_fingerprint"] == good and len(box.engines.started) == 2


def test_a_stop_while_last_good_is_gated_ends_with_exit_0(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes())
    box.then(box.stop)
    box.run()
    box.write(max_num_seqs=8)
    box.engines.add(rejected_by("health", "503"), passes())
    box.engines.while_gating.extend([lambda: None, box.stop])  # the candidate's gates, then last-good's
    assert box.run() == 0
    assert box.status()["detail"] == "stopped by a signal during rolling_back"
    assert box.events()[-1] == "stopped" and box.record(Event.STOPPED)["signal"] == "SIGTERM"


def test_gpu_locks_are_held_for_an_engine_s_life_and_given_back_when_it_cannot_start(tmp_path: Path) -> None:
    box = box_with(tmp_path, passes(), fails_to_start(BadInput("cannot start 'vllm-sim': not found")))
    first = f"candidate svc@{box.write()}"
    box.then(box.reload(max_num_seqs=8))
    with pytest.raises(BadInput):
        box.run()
    second = f"candidate svc@{build_plan(box.profiles, 'svc').fingerprint()}"
    assert box.gpu_locks.log == [f"take {first}", f"release {first}", f"take {second}", f"release {second}"]
