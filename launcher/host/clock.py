"""The real clock behind `gates.context.Clock`: monotonic time and sleeping (tests pass their own)."""

from __future__ import annotations

import time


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))
