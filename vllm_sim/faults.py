"""The injected faults of one simulator run, read from the `--sim-*` flags (see docs/simulator.md).

A value no run could honour is refused like a bad flag (`BadFaultFlag`: usage error, exit 2):
a negative count, or a host pressure above `PRESSURE_CAP_MIB` or above what the host can give
while keeping `PRESSURE_FLOOR_MIB` available.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

PRESSURE_CAP_MIB = 8192
PRESSURE_FLOOR_MIB = 1024
MIB = 1024 * 1024


class BadFaultFlag(ValueError):
    """A `--sim-*` fault value refused before anything starts (the message names the flag)."""


@dataclass(frozen=True, slots=True)
class Faults:
    crash_at: str | None = None
    crash_after_s: float = 1.0
    crash_after_requests: int | None = None
    hang_at: str | None = None
    oom_at_capture: bool = False
    capture_fallback: bool = False
    eager_fallback: bool = False
    marker: str | None = None
    marker_phase: str = "warmup"
    leak_mib_per_min: float = 0.0
    warmup_growth_mib: float = 0.0
    warmup_growth_s: float = 20.0
    tool_fault: str | None = None
    tool_fault_after_requests: int | None = None
    degenerate: bool = False
    slow_decode: float = 1.0
    orphans: bool = False
    ignore_sigterm_s: float = 0.0
    serve_model_name: str | None = None
    gpu_allocate: bool = False
    hang_after_requests: int | None = None
    stall_after_tokens: int | None = None
    error_after_requests: int | None = None
    host_pressure_mib: int = 0
    host_pressure_s: float = 60.0
    wake_fault: str | None = None


def _check_counts(ns: argparse.Namespace) -> None:
    for flag in (
        "hang_after_requests",
        "stall_after_tokens",
        "error_after_requests",
        "crash_after_requests",
        "tool_fault_after_requests",
    ):
        value = getattr(ns, f"sim_{flag}")
        if value is not None and value < 0:
            raise BadFaultFlag(f"argument --sim-{flag.replace('_', '-')}: must be >= 0, not {value}")
    if ns.sim_host_pressure_s <= 0:
        raise BadFaultFlag(f"argument --sim-host-pressure-s: must be > 0, not {ns.sim_host_pressure_s}")


def check_pressure(mib: int, available_bytes: int | None = None) -> None:
    """Refuse a pressure that could hurt the host: above the cap, or leaving under 1 GiB available."""
    if mib < 0 or mib > PRESSURE_CAP_MIB:
        raise BadFaultFlag(f"argument --sim-host-pressure-mib: must be 0..{PRESSURE_CAP_MIB}, not {mib}")
    if mib == 0:
        return
    import psutil  # here, not at the top: the engine core imports this module, never this check

    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    room = available // MIB - PRESSURE_FLOOR_MIB
    if mib > room:
        raise BadFaultFlag(
            f"argument --sim-host-pressure-mib: {mib} MiB would leave less than {PRESSURE_FLOOR_MIB} MiB "
            f"available on this host ({available // MIB} MiB available now); at most {max(room, 0)}"
        )


def faults_from(ns: argparse.Namespace, available_bytes: int | None = None) -> Faults:
    """The faults of this run; `available_bytes` stands in for psutil's reading in unit tests."""
    _check_counts(ns)
    check_pressure(ns.sim_host_pressure_mib, available_bytes)
    return Faults(
        crash_at=ns.sim_crash_at,
        crash_after_s=ns.sim_crash_after_s,
        crash_after_requests=ns.sim_crash_after_requests,
        hang_at=ns.sim_hang_at,
        oom_at_capture=ns.sim_oom_at_capture,
        capture_fallback=ns.sim_capture_fallback,
        eager_fallback=ns.sim_eager_fallback,
        marker=ns.sim_marker,
        marker_phase=ns.sim_marker_phase,
        leak_mib_per_min=ns.sim_leak_mib_per_min,
        warmup_growth_mib=ns.sim_warmup_growth_mib,
        warmup_growth_s=ns.sim_warmup_growth_s,
        tool_fault=ns.sim_tool_fault,
        tool_fault_after_requests=ns.sim_tool_fault_after_requests,
        degenerate=ns.sim_degenerate,
        slow_decode=ns.sim_slow_decode,
        orphans=ns.sim_orphans,
        ignore_sigterm_s=ns.sim_ignore_sigterm_s,
        serve_model_name=ns.sim_serve_model_name,
        gpu_allocate=ns.sim_gpu_allocate,
        hang_after_requests=ns.sim_hang_after_requests,
        stall_after_tokens=ns.sim_stall_after_tokens,
        error_after_requests=ns.sim_error_after_requests,
        host_pressure_mib=ns.sim_host_pressure_mib,
        host_pressure_s=ns.sim_host_pressure_s,
        wake_fault=ns.sim_wake_fault,
    )
