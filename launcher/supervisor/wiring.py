"""The one place the real implementations are plugged into the supervisor's seams (seams.py): the
engine, its judge and vLLM's sleep routes (`real_execute`), and the host-safety layer (preflight,
GPU locks, restart guard, NVML, sd_notify) with the serving watch and the front door
(`host_hooks`). The collaborators over the serving state know only the seams."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import click
import structlog

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.frontdoor.admin import FrontdoorAdmin, FrontdoorError
from launcher.frontdoor.door import door_of, has_frontdoor
from launcher.frontdoor.drain import drain
from launcher.host.gpu_locks import GpuLocks, LoadLocks
from launcher.host.gpu_sim import gpu_probe
from launcher.host.notify import Notifier
from launcher.host.policy import HostPolicy, gpu_demand
from launcher.host.power_caps import PowerCaps
from launcher.host.preflight import run_preflight
from launcher.host.request import HostRequest
from launcher.host.restart_guard import RestartGuard, guard_for
from launcher.profile.candidate import Candidate
from launcher.profile.frontdoor_address import engine_dial
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.attempt import gate_attempt
from launcher.supervisor.engine import EngineProcess
from launcher.supervisor.seams import DrainReport, EngineHandle, Execute, FrontDoor, Hooks
from launcher.supervisor.sleep import VllmSleep
from launcher.watch.runner import ServingWatch, WatchPlan
from launcher.watch.verdict import Judgement


def real_execute() -> Execute:
    """The real engine (a process group with its log keeper), the gate chain, vLLM's sleep routes."""
    return Execute(engine=EngineProcess, gates=gate_attempt, sleep=VllmSleep)


def host_hooks(options: GlobalOptions, profile: str) -> Hooks:
    def preflight(
        candidate: Candidate,
        *,
        serving: frozenset[int] = frozenset(),
        parked: frozenset[int] = frozenset(),
        margin_bytes: int = 0,
    ) -> None:
        request = host_request(candidate)
        report = run_preflight(
            request, options, serving=serving, parked=parked, margin_bytes=margin_bytes, reap_own=True
        )
        if report.reap is not None:  # a dead launcher of this deployment left them: ended, not refused
            ended = "; ".join(r.describe() for r in report.reap.processes)
            _warn(f"preflight: ended this deployment's orphans, left by a launcher that died: {ended}")
        for warning in report.warnings():  # another deployment's orphan, a readable secret cache
            _warn(f"preflight warning: {warning}")

    def gpu_locks(
        candidate: Candidate, *, sharing: Candidate | None = None
    ) -> AbstractContextManager[object]:
        locks = GpuLocks.for_request(host_request(candidate), options.state_dir)
        if sharing is None:
            return locks
        held = GpuLocks.for_request(host_request(sharing), options.state_dir).gpus
        if set(locks.gpus) <= set(held):
            return nullcontext()  # the engine of this launcher beside it (or asleep) holds them
        return GpuLocks(options.state_dir, [g for g in locks.gpus if g not in held], profile)

    def loading(candidate: Candidate, said: Callable[[str], None]) -> AbstractContextManager[object]:
        demand = gpu_demand(host_request(candidate))
        gpus = demand.ids if demand.uses_gpu else ()
        return LoadLocks(options.state_dir, gpus, profile, said=said)

    def restart_guard(candidate: Candidate) -> RestartGuard:
        policy = HostPolicy.from_request(host_request(candidate))
        return guard_for(options.state_dir, profile, policy.restart_max_failures, policy.restart_window_s)

    def front_door(candidate: Candidate) -> FrontDoor | None:
        if not has_frontdoor(candidate.profile_data):
            return None
        door = door_of(candidate.profile, candidate.profile_data, StateStore(options.state_dir))
        return Steering(FrontdoorAdmin(door), door.url, candidate.host)

    return Hooks(
        preflight=preflight,
        notifier=Notifier.from_env(),
        gpu_bytes=_nvml_bytes,
        gpu_locks=gpu_locks,
        restart_guard=restart_guard,
        watch=serving_watch,
        front_door=front_door,
        power=GpuPower(PowerCaps(gpu_probe, StateStore(options.state_dir).power_caps_path(profile))),
        loading=loading,
    )


class GpuPower:
    """seams.TrialPower over the real GPUs: the candidate's GPU set, its limits through the GPU seam."""

    def __init__(self, caps: PowerCaps) -> None:
        self.caps = caps

    def lower(self, candidate: Candidate, watts: float) -> str | None:
        demand = gpu_demand(host_request(candidate))
        if not demand.uses_gpu:
            return f"no GPU to cap: {demand.no_gpu_reason}"
        why, _ = self.caps.lower(demand.ids, watts)
        return why

    def restore(self) -> list[str]:
        return self.caps.restore()


class Steering:
    """The supervisor's hand on the front door (seams.FrontDoor), by engine port: pointing is a file
    write (it works whether the door runs or not), a drain reads the door's admin API; a failure
    comes back in words, since a door that is down must not take serving down."""

    def __init__(
        self, admin: FrontdoorAdmin, url: str, engine_host: str, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.admin = admin
        self.url = url
        self.engine_host = engine_host
        self.clock = clock

    def point_at(self, port: int | None) -> str | None:
        try:
            self.admin.point_at(None if port is None else engine_dial(self.engine_host, port))
        except (FrontdoorError, ValueError) as err:
            return str(err)
        return None

    def drain(self, port: int, timeout_s: float) -> DrainReport:
        drained = drain(self.admin, engine_dial(self.engine_host, port), self.clock, timeout_s)
        return DrainReport(port, drained.in_flight, round(drained.waited_s, 3), drained.problem)


def serving_watch(
    candidate: Candidate, engine: EngineHandle, on_change: Callable[[Judgement], None]
) -> ServingWatch:
    """The real serving watch: HTTP to the candidate, psutil on its engine, NVML where there is one;
    what it finds that is no verdict (a profile matter) goes to the journal as a warning."""
    plan = WatchPlan.of(candidate)
    return ServingWatch(plan, engine.process_tree, on_change, on_note=_warn, gpu_bytes=_nvml_bytes)


def _warn(text: str) -> None:
    """A line on a terminal; an event elsewhere, so the journal files it as a warning (`<4>`)."""
    if sys.stderr.isatty():
        click.echo(text, err=True)
    else:
        structlog.get_logger("vllm-gate").warning("preflight.warning", msg=text)


def host_request(candidate: Candidate) -> HostRequest:
    return HostRequest.of_candidate(candidate)


def _nvml_bytes(pids: Sequence[int]) -> int | None:
    """GPU memory held by these pids (NVML), or None where there is no NVML."""
    wanted = set(pids)
    with gpu_probe() as probe:
        if probe.skip_reason() is not None:
            return None
        return sum(
            p.used_bytes or 0 for d in probe.devices() for p in probe.processes(d.index) if p.pid in wanted
        )
