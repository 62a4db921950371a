"""Signal handlers only record the signal and wake the main loop (as gunicorn's arbiter does); what
a stop needs done at once runs on one helper thread (`StopOnSignal`), never in the handler."""

from __future__ import annotations

import signal
import threading
from collections import deque
from collections.abc import Callable
from types import FrameType, TracebackType

CLOSE_CHECK_S = 0.2  # how long a closed helper may linger; a stop request is seen at once

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class SignalInbox:
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._pending: deque[signal.Signals] = deque()
        self._previous: dict[int, object] = {}
        self.stop_requested = threading.Event()
        self.stop_signal = "a stop"  # the name of the signal that set `stop_requested`, for the log

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
            self.stop_signal = sig.name
            self.stop_requested.set()
        self._wake()

    def take(self) -> list[signal.Signals]:
        taken = []
        while self._pending:
            taken.append(self._pending.popleft())
        return taken


class StopOnSignal:
    """`with StopOnSignal(requested, action):` — while open, `action` runs once on a helper thread
    as soon as `requested` is set (serve, try and probe: end the engine, so that a gate blocked in
    HTTP returns at once). After the block, `action` never starts; leaving waits for a running one."""

    def __init__(self, requested: threading.Event, action: Callable[[], object], *, name: str) -> None:
        self._requested = requested
        self._action = action
        self._name = name
        self._closed = False
        self._lock = threading.Lock()  # `action` runs under it: closing waits for it to end

    def __enter__(self) -> StopOnSignal:
        threading.Thread(target=self._wait, name=self._name, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            self._closed = True  # the thread sees it within CLOSE_CHECK_S and ends; no need to wait

    def _wait(self) -> None:
        while not self._requested.wait(timeout=CLOSE_CHECK_S):
            if self._closed:
                return
        with self._lock:
            if not self._closed:
                self._action()
