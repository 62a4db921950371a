"""The injected faults of one simulator run, read from the `--sim-*` flags (see docs/simulator.md)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


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
    degenerate: bool = False
    slow_decode: float = 1.0
    orphans: bool = False
    ignore_sigterm_s: float = 0.0
    serve_model_name: str | None = None
    gpu_allocate: bool = False


def faults_from(ns: argparse.Namespace) -> Faults:
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
        degenerate=ns.sim_degenerate,
        slow_decode=ns.sim_slow_decode,
        orphans=ns.sim_orphans,
        ignore_sigterm_s=ns.sim_ignore_sigterm_s,
        serve_model_name=ns.sim_serve_model_name,
        gpu_allocate=ns.sim_gpu_allocate,
    )
