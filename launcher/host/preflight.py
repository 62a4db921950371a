"""Preflight: every host check before vLLM starts, with orphan reaping when asked.

The supervisor calls `run_preflight(request, options, reap=..., force=...)`; it raises
`PreflightRefused` (exit 4) with the full reason when any check refuses. `launch preflight` calls
`check_host` to print every result. Only vLLM orphans that block this start are signalled (this
deployment's, or holding its GPUs); `force` widens that to every process on its GPUs, and another
deployment's orphan elsewhere is ended only when the operator names it (`named`: pids or
deployments). `serving` is the engine this launcher serves now: a reload checks its candidate
before stopping it, counting what that engine holds (GPU memory, port, GPU locks) as free.
`parked` is an engine of this launcher that stays on the candidate's GPUs — asleep (`park =
"sleep"`) or serving beside the trial (`trial = "beside"`): what it holds stays counted as used,
but it is neither an orphan nor a second model, and its GPU locks are this launcher's.
`reap_own`: a start's preflight ends the orphans that carry this deployment's mark before it checks
(a dead launcher's leftovers: nobody else can own them while this launcher holds the profile lock).
`margin_bytes`: free memory asked beyond vLLM's own start check (a trial beside production).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial

from basis.clock import Clock, SystemClock
from launcher.errors import BadInput
from launcher.host.compile_cache import check_compile_cache
from launcher.host.gpu import MIB, GpuProbe
from launcher.host.gpu_checks import (
    HostGpus,
    check_gpu_memory,
    check_one_model,
    check_orphans,
    read_gpus,
    relevant_orphans,
    without_holders,
    without_serving,
)
from launcher.host.gpu_locks import LockHolder, busy_holders
from launcher.host.gpu_sim import SimGpuProbe, gpu_probe
from launcher.host.host_checks import (
    check_host_memory,
    check_model_path,
    check_port,
    check_restart_guard,
    check_swap,
    measure_host,
)
from launcher.host.orphans import HostProcess, Role, deployment_id, prefixes_for, scan_vllm
from launcher.host.policy import GpuDemand, HostPolicy, gpu_demand, sim_gpu_set_of
from launcher.host.process_view import ProcessView, my_lineage, view_of
from launcher.host.reaper import ReapReport, reap
from launcher.host.report import CheckResult, PreflightReport
from launcher.host.request import HostRequest
from launcher.host.restart_guard import guard_for
from launcher.settings import GlobalOptions


def run_preflight(
    request: HostRequest,
    options: GlobalOptions,
    reap: bool = False,
    force: bool = False,
    *,
    probe: GpuProbe | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    serving: frozenset[int] = frozenset(),
    parked: frozenset[int] = frozenset(),
    margin_bytes: int = 0,
    reap_own: bool = False,
) -> PreflightReport:
    """All checks; raises `PreflightRefused` when one refuses, else returns the report."""
    report = check_host(
        request,
        options,
        reap,
        force,
        probe=probe,
        clock=clock,
        environ=environ,
        serving=serving,
        parked=parked,
        margin_bytes=margin_bytes,
        reap_own=reap_own,
    )
    report.raise_if_refused()
    return report


def check_host(
    request: HostRequest,
    options: GlobalOptions,
    reap: bool = False,
    force: bool = False,
    *,
    probe: GpuProbe | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    serving: frozenset[int] = frozenset(),
    named: tuple[str, ...] = (),
    parked: frozenset[int] = frozenset(),
    margin_bytes: int = 0,
    reap_own: bool = False,
) -> PreflightReport:
    """All checks, reaping first when asked; never raises for a refusal. `reap_own`: end this
    deployment's own orphans first (its mark), whatever `reap` says — what a start does."""
    policy = HostPolicy.from_request(request)
    reap = reap or policy.reap_orphans
    _check_reap_flags(reap, force, named)
    demand = gpu_demand(request, environ)
    prefixes = prefixes_for(request.env)
    deployment = deployment_id(options.state_dir, request.profile)
    me = view_of(os.getpid())
    user = me.user if me is not None else str(os.geteuid())
    reader = probe if probe is not None else _probe_for(request, environ)
    with reader:
        observe = partial(_observe, reader, demand, prefixes, serving, parked)
        gpus, scan = observe()
        targets = _chosen_targets(scan, gpus, prefixes[-1], deployment, force, named) if reap else []
        targets = targets or (own_marked_orphans(scan, deployment) if reap_own else [])
        reaped = None
        if targets:
            reaped = _reap(targets, policy, clock or SystemClock(), reader)
            gpus, scan = observe()
    locks = _others_locks(options, demand, lent=bool(serving or parked))
    checks = (
        check_gpu_memory(gpus, demand, user, int(policy.cuda_context_mib * MIB), margin_bytes),
        check_orphans(scan, gpus, prefixes[-1], request.profile, user, deployment),
        check_one_model(gpus, demand, locks, user),
        *_machine_checks(request, options, policy, serving),
    )
    where = demand.source if demand.uses_gpu else str(demand.no_gpu_reason)
    if demand.uses_gpu and isinstance(reader, SimGpuProbe):
        where += f"; the simulated GPU set at {reader.directory}, not hardware"
    return PreflightReport(request.profile, checks, demand.ids, where, reaped)


def _probe_for(request: HostRequest, environ: Mapping[str, str] | None) -> GpuProbe:
    """The simulated set a `vllm-sim` start holds its memory on, else the launcher's own reading."""
    directory = sim_gpu_set_of(request, environ)
    return SimGpuProbe(directory) if directory else gpu_probe(environ)


def beside_room(
    request: HostRequest,
    options: GlobalOptions,
    ours: frozenset[int],
    margin_bytes: int,
    *,
    probe: GpuProbe | None = None,
    environ: Mapping[str, str] | None = None,
) -> CheckResult:
    """Whether the GPUs hold the candidate beside the engines of `ours` (what they hold stays used):
    the memory check alone, as a trial beside production makes it, for the dry run's plan."""
    policy = HostPolicy.from_request(request)
    demand = gpu_demand(request, environ)
    me = view_of(os.getpid())
    with probe if probe is not None else _probe_for(request, environ) as reading:
        gpus, _ = _observe(reading, demand, prefixes_for(request.env), frozenset(), ours)
    user = me.user if me is not None else str(os.geteuid())
    return check_gpu_memory(gpus, demand, user, int(policy.cuda_context_mib * MIB), margin_bytes)


def _machine_checks(
    request: HostRequest, options: GlobalOptions, policy: HostPolicy, serving: frozenset[int]
) -> tuple[CheckResult, ...]:
    """The checks no GPU takes part in: host memory, swap, the port, the model's path, the restart
    guard, the compile cache."""
    available, swap_used = measure_host()
    guard = guard_for(
        options.state_dir, request.profile, policy.restart_max_failures, policy.restart_window_s
    )
    return (
        check_host_memory(available, policy.min_host_available_gib),
        check_swap(swap_used, policy.max_swap_used_gib),
        check_port(request.host, request.port, serving),
        check_model_path(request.model),
        check_restart_guard(guard.status(request.fingerprint)),
        check_compile_cache({**os.environ, **request.env}, request.has_secret_env),
    )


def _check_reap_flags(reap: bool, force: bool, named: tuple[str, ...]) -> None:
    """`--force` and `--reap-foreign` only widen what reaping reaps: either without it is bad input."""
    if (force or named) and not reap:
        raise BadInput("--force and --reap-foreign only widen --reap-orphans", hint="add --reap-orphans")


def _others_locks(options: GlobalOptions, demand: GpuDemand, *, lent: bool) -> list[LockHolder]:
    """Who else holds a lock on the GPUs asked for; ours is no one else's when the engine that
    serves is being replaced or one is parked (its locks are released or lent to the candidate)."""
    locks = busy_holders(options.state_dir, demand.ids) if demand.uses_gpu else []
    return [h for h in locks if not (lent and h.pid == os.getpid())]


def _observe(
    probe: GpuProbe,
    demand: GpuDemand,
    prefixes: tuple[str, ...],
    serving: frozenset[int],
    parked: frozenset[int] = frozenset(),
) -> tuple[HostGpus, list[HostProcess]]:
    gpus = read_gpus(probe, demand, prefixes) if demand.uses_gpu else HostGpus((), (), demand.no_gpu_reason)
    gpus = without_holders(without_serving(gpus, serving), parked)  # asleep: its residue stays in free
    return gpus, [p for p in scan_vllm(prefixes) if p.pid not in serving | parked]


def named_targets(scan: list[HostProcess], named: tuple[str, ...], chosen: set[int]) -> list[ProcessView]:
    """Orphans the operator named (`--reap-foreign PID|DEPLOYMENT|PROFILE`); a name that matches no
    orphan is bad input: nothing is signalled on a guess."""
    found: list[ProcessView] = []
    for name in named:
        hits = [p for p in scan if p.role is Role.ORPHAN and _matches(p, name)]
        if not hits:
            raise BadInput(
                f"--reap-foreign {name}: no vLLM orphan has that pid or deployment; nothing was signalled",
                hint="`launch preflight --profile NAME` lists the orphans with their deployment and pid",
            )
        found += [p.view for p in hits if p.pid not in chosen and p.pid not in my_lineage()]
        chosen.update(p.pid for p in hits)
    return found


def _matches(process: HostProcess, name: str) -> bool:
    if name.isdigit():
        return process.pid == int(name)
    mark = process.deployment or ""
    return name in (mark, mark.split("@", 1)[0]) and bool(mark)


def _chosen_targets(
    scan: list[HostProcess],
    gpus: HostGpus,
    own_prefix: str,
    deployment: str,
    force: bool,
    named: tuple[str, ...],
) -> list[ProcessView]:
    """What is reaped: the orphans that block this start (with `force`, every holder of its GPUs),
    then those the operator named."""
    targets = _reap_targets(scan, gpus, own_prefix, deployment, force)
    return targets + named_targets(scan, named, {t.pid for t in targets})


def own_marked_orphans(scan: list[HostProcess], deployment: str) -> list[ProcessView]:
    """The orphans whose deployment mark is this one's: left by a launcher of this deployment that
    died (a SIGKILL while its sleeper hung in a wake kept the port for seconds). Nobody else can
    own them — the profile lock is ours — so a start ends them rather than refuse (issue 42). An
    orphan claimed only by its title prefix stays the operator's to reap: the mark is proof, a
    title is not."""
    protected = my_lineage()
    return [
        p.view
        for p in scan
        if p.role is Role.ORPHAN and p.deployment == deployment and p.pid not in protected
    ]


def _reap_targets(
    scan: list[HostProcess], gpus: HostGpus, own_prefix: str, deployment: str, force: bool
) -> list[ProcessView]:
    """vLLM orphans that block this start; with `force`, also every process holding the target GPUs."""
    chosen = {p.pid: p.view for p in relevant_orphans(scan, gpus, own_prefix, deployment)}
    if force:
        for target in gpus.targets:
            for holder in target.holders:
                if holder.process is not None:
                    chosen.setdefault(holder.pid, holder.process.view)
    protected = my_lineage()
    return [view for pid, view in sorted(chosen.items()) if pid not in protected]


def _reap(targets: list[ProcessView], policy: HostPolicy, clock: Clock, probe: GpuProbe) -> ReapReport:
    return reap(
        targets, grace_s=policy.reap_grace_s, deadline_s=policy.reap_deadline_s, clock=clock, probe=probe
    )
