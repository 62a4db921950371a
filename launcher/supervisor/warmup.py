"""Before what serves is parked or stopped for a change: the candidate's weights read into the page
cache while it still serves (`[supervisor] warm_weights`, docs/park.md), so that the outage no
longer includes the disk (a field report: 43 minutes reading weights; from the page cache a load
runs at GB/s). Only where host RAM holds them beside what the park will pin there (the serving
engine's weights, when it sleeps) and `preflight.min_host_available_gib`; bounded by
`warm_weights_timeout_s`. The figure — or why not — goes into the `reload` record. The reading
itself is launcher/host/page_cache.py.
"""

from __future__ import annotations

from typing import Any

import psutil

from basis.setting import SettingValues
from launcher.host.page_cache import warm, warm_room, weight_files
from launcher.profile.candidate import Candidate
from launcher.profile.keys import PREFLIGHT, engine_settings
from launcher.supervisor.context import Context
from launcher.supervisor.park import Parker
from launcher.supervisor.sleep import GIB
from launcher.supervisor.watchdog import Watchdog


class Warmup:
    def __init__(self, ctx: Context, parker: Parker) -> None:
        self.ctx = ctx
        self.parker = parker

    def before_change(self, candidate: Candidate) -> dict[str, Any] | None:
        """Read `candidate`'s weight files now: the figure for the history (files, bytes, seconds,
        GB/s) or `skipped` with the reason; None when nothing serves (no outage to shorten)."""
        if self.ctx.state.serving is None:
            return None
        if not candidate.settings.warm_weights:
            return {"skipped": "warm_weights = false"}
        found = weight_files(engine_settings(candidate.profile_data).optional_text("model"))
        if isinstance(found, str):
            return {"skipped": found}
        floor = SettingValues.of(PREFLIGHT, candidate.profile_data.get("preflight")).number(
            "min_host_available_gib"
        )
        park = self.parker.park_bytes(candidate)
        why = warm_room(found.total_bytes, psutil.virtual_memory().available, park, floor)
        if why is not None:
            self.ctx.progress.message(f"weights not read ahead: {why}", event="warm.skipped")
            return {"skipped": why, "files": len(found.files), "total_bytes": found.total_bytes}
        self.ctx.progress.message(
            f"reading {found.total_bytes / GIB:.2f} GiB of weights ({len(found.files)} files) into the "
            "page cache while production serves",
            event="warm.start",
        )
        clock = self.ctx.clock
        with Watchdog(self.ctx.hooks.notifier, clock).keepalive():
            done = warm(found, clock, clock.monotonic() + candidate.settings.warm_weights_timeout_s)
        rate = f" ({done.gb_per_s:g} GB/s)" if done.gb_per_s is not None else ""
        cut = "" if done.complete else f", cut at warm_weights_timeout_s of {found.total_bytes / GIB:.2f} GiB"
        self.ctx.progress.message(
            f"weights read ahead: {done.bytes / GIB:.2f} GiB in {done.seconds:.1f} s{rate}{cut}",
            event="warm.done",
            **done.as_record(),
        )
        return done.as_record()
