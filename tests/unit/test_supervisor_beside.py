"""A trial beside production (`[supervisor] trial = "beside"`, supervisor/beside.py) as units on the
rig: production is never held, drained or stopped for a rejected change; a passed one gets the door
at once and production is drained after the switch, then stopped; where the GPUs or NVML say no, the
change falls back to parking with the reason; the power limits are lowered for the trial and put
back on every way out."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from launcher.errors import ExitCode
from launcher.supervisor import reload_requests
from launcher.supervisor.history import Event
from launcher.supervisor.reload_requests import Outcome
from launcher.supervisor.status import Phase
from tests.engine_double import Script, passes, rejected_by
from tests.supervisor_rig import PORT, Rig

BESIDE = {"trial": "beside", "park_port": PORT + 1, "power_limit_w": 300}
DOOR = {"port": 9000, "drain_timeout_s": 45}


def beside_rig(tmp_path: Path, *scripts: Script, **supervisor: object) -> Rig:
    rig = Rig(tmp_path, *scripts, supervisor={**BESIDE, **supervisor}, frontdoor=DOOR)
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    return rig


def reload(rig: Rig, **args: Any) -> reload_requests.Verdict:
    rig.candidate(**args)
    rid = reload_requests.request(rig.store.reloads_dir("svc"))
    rig.reloader.reload()
    found = reload_requests.verdict(rig.store.reloads_dir("svc"), rid)
    assert found is not None
    return found


def test_a_change_rejected_beside_production_never_touches_production(tmp_path: Path) -> None:
    rig = beside_rig(tmp_path, passes(), rejected_by("tool_call", "0/2 cases"))
    production = rig.state.serving
    assert production is not None
    verdict = reload(rig, max_num_seqs=8)
    assert verdict.outcome is Outcome.ROLLED_BACK and verdict.exit_code == int(ExitCode.ROLLED_BACK)
    assert verdict.data == {"trial": "beside"}  # the requester says production served all along
    assert rig.state.serving is production and not rig.engine(production).stops  # never stopped
    assert rig.door.pointed == [PORT] and rig.door.drained == []  # never held, never drained
    candidate = rig.engines.latest
    assert candidate.stops and "--port" in candidate.argv
    assert candidate.argv[candidate.argv.index("--port") + 1] == str(PORT + 1)  # on the second port
    rejected = rig.record(Event.REJECTED)
    assert rejected["beside"] is True and "tool_call" in rejected["reason"]
    status = rig.status()
    assert status["phase"] == Phase.SERVING_LAST_GOOD and status["trial"] is None
    assert status["engine_pid"] == production.engine.pid  # the status never named the candidate's
    assert rig.power.log == ["lower 300", "restore"]
    assert Event.PARKED not in rig.events() and Event.DRAINED not in rig.events()


def test_a_change_that_passes_beside_gets_the_door_at_once_then_production_is_drained_and_stopped(
    tmp_path: Path,
) -> None:
    rig = beside_rig(tmp_path, passes(), passes())
    production = rig.state.serving
    assert production is not None
    verdict = reload(rig, max_num_seqs=8)
    assert verdict.outcome is Outcome.PROMOTED and verdict.down_s == 0.0
    assert rig.door.pointed == [PORT, PORT + 1]  # straight from one engine to the other: no hold
    assert rig.door.drained == [(PORT, 45.0)]  # production's requests in flight, after the switch
    events = rig.events()
    assert events.index(Event.PROMOTED) < events.index(Event.DRAINED) < events.index(Event.ENGINE_STOPPED)
    assert rig.engine(production).stops
    serving = rig.state.serving
    assert serving is not None and serving.candidate.port == PORT + 1
    status = rig.status()
    assert status["phase"] == Phase.SERVING and status["engine_pid"] == serving.engine.pid
    assert status["trial"] is None
    first, second = production.candidate.label, serving.candidate.label
    assert rig.gpu_locks.log == [f"take {first}", f"share {first} with {second}"]  # never let go
    assert rig.power.log == ["lower 300", "restore"]


def test_the_trial_borrows_production_and_counts_it_as_used_not_as_a_second_model(tmp_path: Path) -> None:
    rig = beside_rig(tmp_path, passes(), passes())
    production = rig.state.serving
    assert production is not None
    reload(rig, max_num_seqs=8)
    pid = production.engine.pid
    assert pid is not None
    beside_checks = [
        parked
        for parked, margin in zip(rig.preflight.parked_calls, rig.preflight.margins, strict=True)
        if margin
    ]
    assert beside_checks == [frozenset({pid})]  # the room check: production's memory stays used
    assert rig.preflight.margins[-2] == 1 << 30  # beside_margin_gib's default: 1 GiB beyond vLLM's ask
    assert rig.preflight.parked_calls[-1] == frozenset({pid})  # the start's own check, the same way


def test_no_room_beside_production_falls_back_to_parking_with_the_reason(tmp_path: Path) -> None:
    rig = beside_rig(tmp_path, passes(), passes(), park="sleep")
    rig.preflight.no_room_beside = "GPU 0: free 9.50 GiB − 1.00 GiB margin < needed 24.00 GiB"
    verdict = reload(rig, max_num_seqs=8)
    assert verdict.outcome is Outcome.PROMOTED
    skipped = rig.record(Event.BESIDE_SKIPPED)
    assert "free 9.50 GiB" in skipped["reason"] and skipped["instead"] == "park"
    assert "not tried beside: preflight beside production" in rig.terminal.getvalue()
    events = rig.events()
    assert events.index(Event.BESIDE_SKIPPED) < events.index(Event.PARKED)  # then parked, as before
    assert rig.power.log == []  # nothing lowered for a trial that did not happen


def test_nvml_refusing_the_power_limit_falls_back_to_stopping_production(tmp_path: Path) -> None:
    rig = beside_rig(tmp_path, passes(), passes())
    rig.power.refuse = "GPU 0: power limit 300 W not set: NVML refused: Insufficient Permissions"
    production = rig.state.serving
    assert production is not None
    verdict = reload(rig, max_num_seqs=8)
    assert verdict.outcome is Outcome.PROMOTED
    skipped = rig.record(Event.BESIDE_SKIPPED)
    assert "Insufficient Permissions" in skipped["reason"] and skipped["instead"] == "stop"
    assert rig.power.log == ["refused 300"]  # refused: nothing to restore
    assert rig.engine(production).stops and Event.BESIDE not in rig.events()


def test_production_that_died_during_the_trial_is_replaced_by_last_good_when_the_change_is_rejected(
    tmp_path: Path,
) -> None:
    rig = beside_rig(tmp_path, passes(), rejected_by("smoke", "wrong answer"), passes())
    production = rig.state.serving
    assert production is not None
    rig.engines.while_gating.append(lambda: rig.engine(production).die(signal.SIGKILL))
    verdict = reload(rig, max_num_seqs=8)
    assert verdict.outcome is Outcome.ROLLED_BACK
    assert rig.record(Event.ROLLBACK)["reason"].startswith(rig.record(Event.REJECTED)["reason"][:20])
    serving = rig.state.serving
    assert serving is not None and serving.engine is rig.engines.latest  # last-good, started again
    assert rig.power.log == ["lower 300", "restore"]


def test_a_stop_signal_during_the_trial_still_restores_the_power_limits(tmp_path: Path) -> None:
    rig = beside_rig(tmp_path, passes(), passes())
    rig.engines.while_gating.append(rig.inbox.stop_requested.set)
    verdict = reload(rig, max_num_seqs=8)
    assert verdict.outcome is Outcome.FAILED
    assert rig.power.log == ["lower 300", "restore"]
    assert rig.record(Event.POWER_RESTORED)["problems"] == []


def test_nothing_serving_means_nothing_to_try_beside(tmp_path: Path) -> None:
    rig = beside_rig(tmp_path, passes(), passes())
    why, _ = rig.beside.why_not(rig.candidate_now())
    assert why is None
    rig.state.take_running()
    why, _ = rig.beside.why_not(rig.candidate_now())
    assert why == "nothing serves"
