"""The memory-leak rule, as a pure function of a memory series.

Baseline = the end of window `baseline_window` (2): the allocator's warm-up growth happens before
it and must not count. A leak = `consecutive` (3) windows in a row each growing, AND total growth
since the baseline over `min_growth_mib` (1024). The first rule in the field killed a healthy
server at 500 MiB in one window; this one does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LeakRule:
    baseline_window: int = 2
    consecutive: int = 3
    min_growth_mib: float = 1024.0

    @property
    def windows_needed(self) -> int:
        return self.baseline_window + self.consecutive


@dataclass(frozen=True, slots=True)
class LeakJudgement:
    judged: bool  # False: too few windows to say anything (never a pass)
    leak: bool
    baseline_mib: float | None
    growth_mib: float
    longest_growing_run: int
    reason: str


def judge(series_mib: Sequence[float], rule: LeakRule) -> LeakJudgement:
    """`series_mib[i]` is the memory at the end of window i+1."""
    if len(series_mib) < rule.windows_needed:
        return LeakJudgement(
            judged=False,
            leak=False,
            baseline_mib=None,
            growth_mib=0.0,
            longest_growing_run=0,
            reason=f"{len(series_mib)} windows measured; the rule needs {rule.windows_needed}",
        )
    baseline = series_mib[rule.baseline_window - 1]
    after = series_mib[rule.baseline_window - 1 :]
    run = longest = 0
    leak_at: int | None = None
    for index in range(1, len(after)):
        run = run + 1 if after[index] > after[index - 1] else 0
        longest = max(longest, run)
        if run >= rule.consecutive and after[index] - baseline > rule.min_growth_mib and leak_at is None:
            leak_at = index
    growth = series_mib[-1] - baseline
    if leak_at is not None:
        reason = (
            f"grew {rule.consecutive}+ windows in a row to {after[leak_at] - baseline:+.0f} MiB "
            f"over the baseline ({baseline:.0f} MiB at the end of window {rule.baseline_window}) "
            f"> {rule.min_growth_mib:.0f} MiB"
        )
        return LeakJudgement(True, True, baseline, growth, longest, reason)
    reason = (
        f"{growth:+.0f} MiB since the baseline ({baseline:.0f} MiB), "
        f"longest growing run {longest} window(s): "
        f"no leak (needs {rule.consecutive} growing windows and > {rule.min_growth_mib:.0f} MiB)"
    )
    return LeakJudgement(True, False, baseline, growth, longest, reason)
