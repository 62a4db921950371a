"""The dry run's `warm:` line: whether a change of this profile would read the candidate's weights
into the page cache before production is parked or stopped (`[supervisor] warm_weights`,
docs/park.md) — the files and bytes, host RAM against what a park pins there, or why not — and
the last change's figure (GB/s) from the history."""

from __future__ import annotations

from typing import Any

import psutil

from basis.setting import SettingValues
from launcher.errors import BadInput
from launcher.host.page_cache import GIB, warm_room, weight_files
from launcher.profile.keys import PREFLIGHT, SupervisorSettings, engine_settings
from launcher.profile.plan import LaunchPlan
from launcher.state.store import StateStore
from launcher.supervisor.history import Event, History


def warm_plan(plan: LaunchPlan, facts: dict[str, Any] | None, store: StateStore) -> dict[str, Any]:
    data = plan.profile.data
    settings = SupervisorSettings.read(data.get("supervisor"))
    shown: dict[str, Any] = {"enabled": settings.warm_weights, "last": _last_warm(store, plan.name)}
    if not settings.warm_weights:
        return {**shown, "skipped": "warm_weights = false"}
    found = weight_files(engine_settings(data).optional_text("model"))
    if isinstance(found, str):
        return {**shown, "skipped": found}
    weights = facts.get("weights_gib") if facts else None
    parks = settings.park == "sleep" and isinstance(weights, int | float) and not isinstance(weights, bool)
    park_bytes = int(float(weights) * GIB) if parks and weights is not None else 0
    floor = SettingValues.of(PREFLIGHT, data.get("preflight")).number("min_host_available_gib")
    available = psutil.virtual_memory().available
    return {
        **shown,
        "files": len(found.files),
        "total_bytes": found.total_bytes,
        "park_bytes": park_bytes,
        "available_bytes": available,
        "timeout_s": settings.warm_weights_timeout_s,
        "skipped": warm_room(found.total_bytes, available, park_bytes, floor),
    }


def warm_lines(warm: dict[str, Any] | None) -> list[str]:
    if warm is None:
        return []
    last = warm["last"]
    was = f"; the last change's: {_figure(last)}" if last else ""
    if warm.get("skipped"):
        return [f"warm: weights not read ahead of a change: {warm['skipped']}{was}", ""]
    return [
        f"warm: before production is parked or stopped, {warm['total_bytes'] / GIB:.2f} GiB of weights "
        f"({warm['files']} files) are read into the page cache while it serves, within "
        f"{warm['timeout_s']:g} s{was}",
        "",
    ]


def _figure(last: dict[str, Any]) -> str:
    if last.get("skipped"):
        return f"skipped: {last['skipped']}"
    rate = f" at {last['gb_s']:g} GB/s" if last.get("gb_s") is not None else ""
    return f"{last.get('bytes', 0) / GIB:.2f} GiB in {last.get('seconds', 0):g} s{rate}"


def _last_warm(store: StateStore, name: str) -> dict[str, Any] | None:
    """The newest `reload` record's `warm` figure for the profile, if any."""
    try:
        records = History(store.history_path).read(profile=name)
    except BadInput:
        return None
    for record in reversed(records):
        if record.get("event") == Event.RELOAD and isinstance(record.get("warm"), dict):
            return dict(record["warm"])
    return None
