"""Signal handlers only record the signal and wake the main loop (as gunicorn's arbiter does)."""

from __future__ import annotations

import signal
import threading
from collections import deque
from collections.abc import Callable
from types import FrameType

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class SignalInbox:
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._pending: deque[signal.Signals] = deque()
        self._previous: dict[int, object] = {}
        self.stop_requested = threading.Event()

    def install(self) -> None:
        for sig in HANDLED:
            self._previous[sig] = signal.signal(sig, self._record)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _record(self, signum: int, frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        self._pending.append(sig)
        if sig in (signal.SIGTERM, signal.SIGINT):
            self.stop_requested.set()
        self._wake()

    def take(self) -> list[signal.Signals]:
        taken = []
        while self._pending:
            taken.append(self._pending.popleft())
        return taken
