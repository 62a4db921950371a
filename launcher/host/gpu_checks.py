"""The GPU checks: free memory vs what vLLM will demand, vLLM orphans, one model per GPU set.

vLLM 0.33 refuses to start unless each GPU's free memory is at least gpu_memory_utilization ×
total (`request_memory`, vllm-facts.md §5.2). Checking that here, naming every process that holds the
memory, turns "Free memory on device ... is less than desired GPU memory utilization" after a
minute of loading into a refusal that says whom to stop, before anything starts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from launcher.host.gpu import GIB, GpuDevice, GpuProbe, resolve_device
from launcher.host.gpu_locks import LockHolder
from launcher.host.orphans import HostProcess, Role, classify_pid
from launcher.host.policy import GpuDemand
from launcher.host.report import CheckName, CheckResult, ok, refused, skipped, warned

REAP_HINT = (
    "`launch preflight --profile {profile} --reap-orphans` ends these orphans (SIGTERM, then SIGKILL); "
    "it never signals another deployment's processes elsewhere"
)


@dataclass(frozen=True, slots=True)
class Holder:
    """A process the driver lists on a GPU; `process` is None when its pid is not visible from here."""

    pid: int
    used_bytes: int | None
    process: HostProcess | None

    def describe(self, me: str) -> str:
        if self.process is None:
            size = f", {self.used_bytes / GIB:.1f} GiB" if self.used_bytes is not None else ""
            return f"pid {self.pid} (not visible from here{size})"
        return self.process.describe(self.used_bytes, me=me)


@dataclass(frozen=True, slots=True)
class TargetGpu:
    token: str
    device: GpuDevice | None
    holders: tuple[Holder, ...]
    ours_bytes: int = 0  # held by this launcher's engines kept on it (asleep, or serving beside a trial)


@dataclass(frozen=True, slots=True)
class HostGpus:
    """The target GPUs as NVML sees them, or why they could not be read."""

    targets: tuple[TargetGpu, ...]
    indexes: tuple[int, ...]  # every GPU on the host
    skip_reason: str | None

    def held_on_targets(self) -> dict[int, list[tuple[str, int | None]]]:
        """pid -> [(gpu, bytes)] over the target GPUs."""
        held: dict[int, list[tuple[str, int | None]]] = {}
        for target in self.targets:
            for holder in target.holders:
                held.setdefault(holder.pid, []).append((target.token, holder.used_bytes))
        return held


def read_gpus(probe: GpuProbe, demand: GpuDemand, prefixes: Sequence[str]) -> HostGpus:
    reason = probe.skip_reason()
    if reason is not None:
        return HostGpus((), (), reason)
    devices = probe.devices()
    targets = []
    for token in demand.ids:
        device = resolve_device(token, devices)
        holders: tuple[Holder, ...] = ()
        if device is not None:
            holders = tuple(
                Holder(p.pid, p.used_bytes, classify_pid(p.pid, prefixes))
                for p in probe.processes(device.index)
            )
        targets.append(TargetGpu(token, device, holders))
    return HostGpus(tuple(targets), tuple(d.index for d in devices), None)


def without_serving(gpus: HostGpus, serving: frozenset[int]) -> HostGpus:
    """The GPUs as they will be once the engine this launcher serves now is stopped (a reload)."""
    if not serving:
        return gpus
    targets = []
    for target in gpus.targets:
        mine = [h for h in target.holders if h.pid in serving]
        device = target.device
        if device is not None and mine:
            device = replace(device, free_bytes=device.free_bytes + sum(h.used_bytes or 0 for h in mine))
        others = tuple(h for h in target.holders if h.pid not in serving)
        targets.append(TargetGpu(target.token, device, others))
    return HostGpus(tuple(targets), gpus.indexes, gpus.skip_reason)


def without_holders(gpus: HostGpus, pids: frozenset[int]) -> HostGpus:
    """The GPUs with these processes left out of the holders (a parked engine: it serves no model),
    their memory still counted as used, as the device reports it."""
    if not pids:
        return gpus
    targets = [
        TargetGpu(
            t.token,
            t.device,
            tuple(h for h in t.holders if h.pid not in pids),
            sum(h.used_bytes or 0 for h in t.holders if h.pid in pids),
        )
        for t in gpus.targets
    ]
    return HostGpus(tuple(targets), gpus.indexes, gpus.skip_reason)


def check_gpu_memory(
    gpus: HostGpus, demand: GpuDemand, me: str, context_bytes: int = 0, margin_bytes: int = 0
) -> CheckResult:
    """vLLM's own test, made before it runs: free memory, less the CUDA context its process creates
    before measuring (and a margin, for a trial beside production), against gpu_memory_utilization ×
    the total CUDA reports."""
    unmeasured = _memory_unmeasured(gpus, demand)
    if unmeasured is not None:
        return unmeasured
    short: list[str] = []
    fine: list[str] = []
    data: list[dict[str, object]] = []
    for target in gpus.targets:
        if target.device is None:
            have = ",".join(str(i) for i in gpus.indexes) or "none"
            short.append(f"GPU {target.token} does not exist (this host has GPUs {have})")
            continue
        line, enough, row = _free_for_vllm(target, target.device, demand, me, context_bytes, margin_bytes)
        data.append(row)
        (fine if enough else short).append(line)
    if short:
        hint = (
            f"vLLM needs gpu_memory_utilization {demand.utilization:g} × each GPU's memory free at start; "
            "end the processes named, or lower gpu_memory_utilization"
        )
        return refused(CheckName.GPU_MEMORY, "; ".join(short), hint, gpus=data)
    return ok(CheckName.GPU_MEMORY, "; ".join(fine), gpus=data)


def _memory_unmeasured(gpus: HostGpus, demand: GpuDemand) -> CheckResult | None:
    """The memory check's verdict where it measures nothing: no GPU, the wrong number of them,
    NVML unreadable, or a KV cache sized in bytes (vLLM then ignores gpu_memory_utilization)."""
    if not demand.uses_gpu:
        return skipped(CheckName.GPU_MEMORY, str(demand.no_gpu_reason))
    if demand.problem:
        return refused(
            CheckName.GPU_MEMORY,
            demand.problem,
            "set CUDA_VISIBLE_DEVICES to as many GPUs as the profile needs",
        )
    if gpus.skip_reason is not None:
        return skipped(CheckName.GPU_MEMORY, gpus.skip_reason)
    if demand.kv_cache_bytes_set:
        return skipped(
            CheckName.GPU_MEMORY, "kv_cache_memory_bytes is set: vLLM does not size by gpu_memory_utilization"
        )
    return None


def _free_for_vllm(
    target: TargetGpu,
    device: GpuDevice,
    demand: GpuDemand,
    me: str,
    context_bytes: int,
    margin_bytes: int = 0,
) -> tuple[str, bool, dict[str, object]]:
    """One GPU: (what it has against what vLLM needs, whether that is enough, the figures)."""
    needed = demand.utilization * device.cuda_total_bytes
    row: dict[str, object] = {
        "gpu": target.token,
        "free_mib": device.free_bytes >> 20,
        "needed_mib": int(needed) >> 20,
        "cuda_context_mib": context_bytes >> 20,
    }
    numbers = f"GPU {target.token}: free {device.free_bytes / GIB:.2f} GiB"
    if context_bytes:
        numbers += f" − {context_bytes / GIB:.2f} GiB CUDA context"
    if margin_bytes:
        numbers += f" − {margin_bytes / GIB:.2f} GiB margin"
        row["margin_mib"] = margin_bytes >> 20
    if device.free_bytes - context_bytes - margin_bytes >= needed:
        return f"{numbers} >= needed {needed / GIB:.2f} GiB", True, row
    named = [h.describe(me) for h in target.holders]
    if target.ours_bytes:
        named.insert(0, f"this launcher's engines kept on it ({target.ours_bytes / GIB:.2f} GiB)")
    held = f"held by {', '.join(named)}" if named else "no process visible from here holds it"
    return f"{numbers} < needed {needed / GIB:.2f} GiB; {held}", False, row


def relevant_orphans(
    scan: Sequence[HostProcess], gpus: HostGpus, own_prefix: str, deployment: str
) -> list[HostProcess]:
    """Orphans that block this start: this deployment's own, or any holding memory on its GPUs.
    Another deployment's orphan elsewhere takes nothing this start needs (its port is the port
    check's business), so it only earns a warning."""
    on_targets = gpus.held_on_targets()
    return [
        p
        for p in scan
        if p.role is Role.ORPHAN and (p.owned_by(deployment, own_prefix) or p.pid in on_targets)
    ]


def check_orphans(
    scan: Sequence[HostProcess],
    gpus: HostGpus,
    own_prefix: str,
    profile: str,
    me: str,
    deployment: str = "",
    now: float | None = None,
) -> CheckResult:
    blocking = relevant_orphans(scan, gpus, own_prefix, deployment)
    others = [p for p in scan if p.role is Role.ORPHAN and p not in blocking]
    when = time.time() if now is None else now
    note = (
        f"; {len(others)} orphan(s) of other deployments, not on this profile's GPUs, left alone: "
        + "; ".join(f"{p.label} ({p.owner(when)})" for p in others)
        if others
        else ""
    )
    data = {"orphans": [p.pid for p in blocking], "foreign_orphans": [p.pid for p in others]}
    if not blocking:
        if others:
            hint = "not this deployment's: end them from their own, or name them: --reap-foreign PID"
            return warned(CheckName.ORPHANS, f"no vLLM orphans of this deployment{note}", hint, **data)
        return ok(CheckName.ORPHANS, "no vLLM orphans", **data)
    held = gpus.held_on_targets()
    listed = ", ".join(_orphan_text(p, held.get(p.pid, []), me) for p in blocking)
    return refused(
        CheckName.ORPHANS,
        f"{len(blocking)} vLLM orphan(s), parent gone: {listed}{note}",
        REAP_HINT.format(profile=profile),
        **data,
    )


def _orphan_text(process: HostProcess, held: list[tuple[str, int | None]], me: str) -> str:
    sizes = [f"{b / GIB:.1f} GiB on GPU {gpu}" if b is not None else f"on GPU {gpu}" for gpu, b in held]
    return process.describe(None, me=me, extra=sizes)


def check_one_model(gpus: HostGpus, demand: GpuDemand, locks: Sequence[LockHolder], me: str) -> CheckResult:
    """A second model on any of the same GPUs is refused, however much memory is free."""
    if not demand.uses_gpu:
        return skipped(CheckName.ONE_MODEL, str(demand.no_gpu_reason))
    servers = _model_servers(gpus)
    problems = [h.describe() for h in locks] + [
        f"GPU {token} already serves a model: " + ", ".join(h.describe(me) for h in found)
        for token, found in servers
    ]
    data = {"lock_holders": [h.pid for h in locks]}
    if problems:
        hint = _one_model_hint(servers)
        return refused(CheckName.ONE_MODEL, "one model per GPU set: " + "; ".join(problems), hint, **data)
    gpu_list = ",".join(demand.ids)
    nvml = (
        "NVML lists no model server" if gpus.skip_reason is None else f"NVML part skipped: {gpus.skip_reason}"
    )
    return ok(CheckName.ONE_MODEL, f"GPUs {gpu_list}: no other launcher holds their locks; {nvml}", **data)


def _model_servers(gpus: HostGpus) -> list[tuple[str, list[Holder]]]:
    """(GPU, the model servers on it) for each target GPU that already serves a model."""
    found = []
    for target in gpus.targets:
        servers = [h for h in target.holders if h.process is not None and h.process.role is Role.SERVER]
        if servers:
            found.append((target.token, servers))
    return found


def _one_model_hint(servers: list[tuple[str, list[Holder]]]) -> str:
    """Stop the other model; one that no launcher started (no deployment mark) is stopped by hand."""
    processes = [h.process for _, found in servers for h in found if h.process is not None]
    by_hand = sorted({_root_pid(p) for p in processes if not p.deployment})
    if not by_hand:
        return "stop the other model first (`systemctl stop vllm-gate@PROFILE`); two models never share a GPU"
    pids = " ".join(str(pid) for pid in by_hand)
    return (
        f"pid {pids} was not started by vllm-gate (no deployment mark), so no launcher will stop it: "
        f"stop it where it was started (as its user: `kill {pids}`), or give this profile other "
        "GPUs (CUDA_VISIBLE_DEVICES); two models never share a GPU"
    )


def _root_pid(process: HostProcess) -> int:
    """The API server (or program) a model's process hangs off: what an operator would stop."""
    return process.root.pid if process.root is not None else process.pid
