"""Every startup a log shows, in short: a restart loop is itself a fact the operator needs.

A `Restart=always` unit that fails the same way a thousand times writes a thousand startups into
one log. The facts describe the last one; this keeps, for each, where it began, its version, its
outcome and failure kind, bounded (the most recent `KEEP`) with totals over all of them.
"""

from __future__ import annotations

from collections import Counter, deque

from launcher.logfacts.facts import StartupSummary

KEEP = 1000  # summaries kept; older ones only count in the totals


class History:
    def __init__(self) -> None:
        self._recent: deque[StartupSummary] = deque(maxlen=KEEP)
        self.outcomes: Counter[str] = Counter()  # "ready", "failed:free_memory", "unknown"
        self.total = 0

    def add(self, summary: StartupSummary) -> None:
        self._recent.append(summary)
        self.total += 1
        self.outcomes[_label(summary)] += 1

    def with_current(self, current: StartupSummary | None) -> tuple[list[StartupSummary], dict[str, int]]:
        """The kept summaries and the totals, the startup still being read included."""
        recent = list(self._recent)
        totals = Counter(self.outcomes)
        if current is not None:
            recent = (recent + [current])[-KEEP:]
            totals[_label(current)] += 1
        return recent, dict(sorted(totals.items()))


def _label(s: StartupSummary) -> str:
    if s.outcome == "failed":
        return f"failed:{s.failure_kind}"
    return s.outcome or "unknown"
