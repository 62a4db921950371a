"""Time as a seam: what waits, deadlines and stamps read (`Clock`), and the real one (`SystemClock`).

Every wait of ours reads a clock passed in, so a test drives time with its own (tenacity's
`sleep=` argument); the gates, the supervisor, the serving watch, preflight and the probe share
this one. A wait on an event goes through `Clock.wait`, so a fake clock can pass the time a wait
would have taken without anyone sleeping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Waitable(Protocol):
    """What `Clock.wait` waits on: a `threading.Event`, or anything that waits like one."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def time(self) -> float:
        """Seconds since the epoch: for stamps and for outside observers, never for deadlines."""

    def sleep(self, seconds: float) -> None: ...

    def wait(self, event: Waitable, timeout_s: float | None) -> bool:
        """Until `event` is set or `timeout_s` passed (None: no bound); whether it is set."""


class SystemClock:
    """Monotonic time, the wall clock, sleeping and waiting; a negative sleep or wait is none."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: Waitable, timeout_s: float | None) -> bool:
        return event.wait(None if timeout_s is None else max(0.0, timeout_s))


SYSTEM_CLOCK = SystemClock()


STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_stamp(epoch_s: float) -> str:
    """`2026-09-17T10:15:00.123456Z`: how every record of ours writes a moment."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime(STAMP_FORMAT)


def epoch_of(stamp: object) -> float | None:
    """The moment a `utc_stamp` names, in seconds since the epoch; None for anything else: the one
    reader of our stamps, beside their one writer."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.strptime(stamp, STAMP_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
