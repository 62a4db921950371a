"""After promotion, the leak rule keeps running on the engine's memory, window by window."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from gates.leak_rule import LeakRule, judge
from gates.memory_leak import MemoryLeakGate
from launcher.supervisor.adapters import ProcessMemory
from launcher.supervisor.candidate import Candidate

MIB = 1024 * 1024
ACTIONS = ("log", "restart", "rollback")


class LeakMonitor:
    def __init__(self, rule: LeakRule, window_s: float, action: str) -> None:
        self.rule = rule
        self.tick_s = window_s
        self.action = action
        self.series: list[float] = []
        self._next = time.monotonic() + window_s
        self._reported = False

    @classmethod
    def from_candidate(cls, candidate: Candidate | None) -> LeakMonitor | None:
        """Enabled by `[supervisor] leak_monitor = "log" | "restart" | "rollback"`; the rule and the
        window come from `[gates.memory_leak]`."""
        if candidate is None:
            return None
        action = candidate.settings.leak_monitor
        if action not in ACTIONS:
            return None
        gate = MemoryLeakGate(candidate.gate_tables.get("memory_leak", {}))
        return cls(gate.rule, float(gate.setting("window_s")), str(action))

    def sample(self, pids: Sequence[int], gpu_bytes: Callable[[Any], int | None] | None) -> str | None:
        """Take a sample when a window has passed; returns the finding once, when a leak shows."""
        if time.monotonic() < self._next:
            return None
        self._next += self.tick_s
        self.series.append(ProcessMemory(gpu_bytes).rss_bytes(pids) / MIB)
        window = self.series[-(self.rule.windows_needed + 3) :]
        if len(self.series) >= self.rule.windows_needed * 4:
            self.series = self.series[-self.rule.windows_needed * 2 :]
        judgement = judge(window, self.rule)
        if judgement.leak and not self._reported:
            self._reported = True
            return judgement.reason
        return None
