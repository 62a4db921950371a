"""Time as a seam: what waits and deadlines read (`Clock`), and the real one (`SystemClock`).

Every wait of ours reads a clock passed in, so a test drives time with its own (tenacity's
`sleep=` argument); the gates, the supervisor, preflight and the probe share this one.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Monotonic time and sleeping; a negative sleep is none."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))
