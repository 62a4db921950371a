"""The dry run's `trial:` lines: where a change of this profile would be tried, and why not beside.

With `trial = "beside"` the plan says whether the GPUs hold the candidate beside what serves now
(the memory check a trial makes, production's memory counted as used), each GPU's power limit and
the one `power_limit_w` asks for — and, where the memory does not hold, that the change falls back
to `park` or `stop`, with the reason, before anyone applies it.
"""

from __future__ import annotations

from typing import Any

import psutil

from launcher.errors import BadInput
from launcher.host.preflight import beside_room
from launcher.host.request import HostRequest
from launcher.profile.candidate import Candidate
from launcher.profile.plan import LaunchPlan
from launcher.settings import GlobalOptions
from launcher.state.serving import serving_now
from launcher.state.store import StateStore
from launcher.supervisor.sleep import GIB


def trial_plan(plan: LaunchPlan, options: GlobalOptions, store: StateStore) -> dict[str, Any] | None:
    """None unless the profile tries changes beside production; else what a change would do."""
    candidate = Candidate.from_plan(plan)
    settings = candidate.settings
    if settings.trial != "beside" or settings.park_port is None:
        return None
    ours = _production_pids(store, plan.name)
    moved = candidate.at_port(settings.park_port)
    try:
        room = beside_room(
            HostRequest.of_candidate(moved), options, ours, int(settings.beside_margin_gib * GIB)
        )
    except BadInput as err:
        return {"mode": "beside", "port": settings.park_port, "room": None, "problem": err.message}
    fallback = "park" if settings.park == "sleep" else "stop"
    holds = room.status.value != "refused"
    return {
        "mode": "beside",
        "port": settings.park_port,
        "serving_pids": sorted(ours),
        "room": room.status.value,
        "memory": room.detail,
        "falls_back_to": None if holds else fallback,
        "power_limit_w": settings.power_limit_w,
    }


def trial_lines(trial: dict[str, Any] | None) -> list[str]:
    if trial is None:
        return []
    port = trial["port"]
    if trial.get("problem"):
        return [f"trial: beside production on port {port}; GPUs not read: {trial['problem']}", ""]
    against = (
        "what serves now" if trial["serving_pids"] else "nothing serving now (the first start is a plain one)"
    )
    lines = [f"trial: beside production, on port {port}, checked against {against}:"]
    lines.append(f"  GPU memory ({trial['room']}): {trial['memory']}")
    if trial["falls_back_to"]:
        lines.append(f"  a change now is not tried beside: {trial['falls_back_to']} instead")
    if trial["power_limit_w"] is not None:
        lines.append(
            f"  each GPU's power limit {trial['power_limit_w']:g} W for the trial (NVML, as root), then back"
        )
    return [*lines, ""]


def _production_pids(store: StateStore, name: str) -> frozenset[int]:
    """The engine that serves the profile now and its children (nothing when nothing serves)."""
    try:
        entry = serving_now(store, name)
    except BadInput:
        return frozenset()
    pid = entry.get("engine_pid")
    if not entry.get("serving") or not isinstance(pid, int):
        return frozenset()
    try:
        root = psutil.Process(pid)
        return frozenset([pid, *(child.pid for child in root.children(recursive=True))])
    except psutil.Error:
        return frozenset()
