"""kernel_marker: every pattern must appear in the log of this start.

A kernel patch that was built but never ran must not be promoted: the gate refuses because it
cannot confirm the fast path runs, not because anything is slow.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from basis.setting import Setting
from gates.base import GateBase, Need
from gates.context import GateContext
from gates.outcome import Outcome


class KernelMarkerGate(GateBase):
    name = "kernel_marker"
    NEEDS: ClassVar[frozenset[Need]] = frozenset({Need.LOG})
    DEFAULT_TIMEOUT_S = 1800.0
    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "patterns",
            list,
            [],
            "Regexes that must each appear in the log after this start.",
            items=str,
            regex=True,
        ),
        Setting(
            "after_ready_s",
            (int, float),
            30.0,
            "How long to keep looking once the server is ready (a kernel may announce itself on first use).",
            unit="s",
            minimum=0,
            maximum=3600,
        ),
    )

    def __init__(self, table: dict[str, Any] | None = None) -> None:
        super().__init__(table)
        self.patterns = [re.compile(p) for p in self.setting("patterns")]
        self.found: dict[str, str] = {}
        self._scanned = 0
        self._ready_at: float | None = None

    def check(self, ctx: GateContext) -> Outcome:
        if not self.patterns:
            return Outcome.skipped("no patterns configured ([gates.kernel_marker] patterns)")
        lines, self._scanned = ctx.log.lines_since(self._scanned)
        for line in lines:
            for pattern in self.patterns:
                if pattern.pattern not in self.found and pattern.search(line):
                    self.found[pattern.pattern] = line
        missing = [p.pattern for p in self.patterns if p.pattern not in self.found]
        if not missing:
            return Outcome.passed(f"seen: {', '.join(self.found)}", lines=dict(self.found))
        summary = f"cannot confirm the fast path is running: {', '.join(missing)} not seen"
        if ctx.log.facts().get("outcome") == "ready":
            now = ctx.clock.monotonic()
            self._ready_at = self._ready_at if self._ready_at is not None else now
            if now - self._ready_at >= float(self.setting("after_ready_s")):
                return Outcome.failed(summary, missing=missing, found=dict(self.found))
        return Outcome.not_yet(summary, missing=missing)
