"""A fake clock for code that waits on several threads at once (the serving watch's two loops):
time moves only when every thread that takes part is waiting on the clock, and then straight to the
earliest moment one of them waits for. Nothing sleeps for real but the short polls that notice an
event set by another thread, so a watch's 40 s to a verdict take milliseconds, in the same order of
events as on a real clock.

    clock = VirtualClock(actors=3)   # the watch's two threads and the test's own
    watch = ServingWatch(plan, ..., clock=clock, http=server)
    watch.start()
    clock.wait(verdict_seen, 600)    # the test is an actor too: it waits through the clock
"""

from __future__ import annotations

import math
import threading
import time

from basis.clock import Waitable

NOTICE_S = 0.002  # how often a waiter looks whether another thread set its event (real seconds)
STALLED_S = 120.0  # real seconds with no move of time and no event: a thread blocked outside the clock


class _Never:
    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        return False


class VirtualClock:
    def __init__(self, actors: int, start: float = 1000.0, epoch: float = 1_790_000_000.0) -> None:
        self.actors = actors
        self.epoch = epoch
        self._now = start
        self._cond = threading.Condition()
        self._waiting: dict[int, tuple[float, Waitable]] = {}  # thread -> (until, event)

    def monotonic(self) -> float:
        with self._cond:
            return self._now

    def time(self) -> float:
        return self.epoch + self.monotonic()

    def sleep(self, seconds: float) -> None:
        self.wait(_Never(), max(0.0, seconds))

    def wait(self, event: Waitable, timeout_s: float | None) -> bool:
        me = threading.get_ident()
        with self._cond:
            until = math.inf if timeout_s is None else self._now + max(0.0, timeout_s)
            self._waiting[me] = (until, event)
            stalled_at = time.monotonic() + STALLED_S
            try:
                while not event.is_set() and self._now < until:
                    if self._advance():
                        stalled_at = time.monotonic() + STALLED_S
                    else:
                        self._cond.wait(NOTICE_S)
                    if time.monotonic() > stalled_at:
                        raise AssertionError(
                            f"virtual time stands still: {len(self._waiting)}/{self.actors} wait"
                        )
                return event.is_set()
            finally:
                del self._waiting[me]
                self._cond.notify_all()

    def _advance(self) -> bool:
        """Move time to the earliest deadline once every actor waits and none is about to wake."""
        if len(self._waiting) < self.actors:
            return False
        if any(event.is_set() or until <= self._now for until, event in self._waiting.values()):
            return False  # one of them is about to wake: it moves first
        earliest = min(until for until, _ in self._waiting.values())
        if math.isinf(earliest):
            raise AssertionError("every thread waits without a deadline: nothing can ever happen")
        self._now = max(self._now, earliest)
        self._cond.notify_all()
        return True
