"""Processes a stopped server or a dead probe may leave: found by process group or by the probe's
marker variable, ended TERM → grace → KILL by the host reaper (which also waits for the GPU memory)."""

from __future__ import annotations

from collections.abc import Iterable

import psutil

from basis.clock import Clock
from launcher.host.gpu_sim import gpu_probe
from launcher.host.process_view import ProcessView, my_lineage, view_of
from launcher.host.reaper import ReapReport, reap


def marked(name: str, value: str) -> list[int]:
    """Live processes started with `name=value` in their environment (ours are readable, others skipped)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(name) == value:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def end_processes(
    pids: Iterable[int], *, grace_s: float, deadline_s: float, clock: Clock
) -> ReapReport | None:
    """TERM → `grace_s` → KILL each pid (never this process or its parents); None when none is left."""
    protected = my_lineage()
    views = [v for v in (view_of(pid) for pid in sorted(set(pids)) if pid not in protected) if v is not None]
    if not views:
        return None
    return _reap(views, grace_s, deadline_s, clock)


def _reap(views: list[ProcessView], grace_s: float, deadline_s: float, clock: Clock) -> ReapReport:
    with gpu_probe() as probe:
        return reap(views, grace_s=grace_s, deadline_s=deadline_s, clock=clock, probe=probe)
