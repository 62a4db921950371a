"""What every simulated process shares: its title, its SIGTERM policy, its way out (and what runs on it)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

_LEAVING: list[Callable[[], None]] = []  # run by leave(), in order: what the process gives back
_TITLE = [""]


def on_leave(give_back: Callable[[], None]) -> None:
    """Run `give_back` when this process leaves through `leave` (a simulated GPU hold, released as
    the driver frees a process's memory). SIGKILL runs nothing: readers of what it held see it dead."""
    _LEAVING.append(give_back)


def leave(code: int) -> NoReturn:
    """End this process now, as vLLM's processes end: streams flushed, no interpreter teardown —
    multiprocessing's exit hooks would wait for children that were stopped already or deliberately
    left (`--sim-orphans`). Skipping the teardown skips atexit too, so a coverage measurement of the
    test suite (coverage's subprocess patch) is saved here first; without one this does nothing."""
    while _LEAVING:
        with contextlib.suppress(Exception):  # leaving cannot fail: what is not given back, a reader prunes
            _LEAVING.pop(0)()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said
            stream.flush()
    _save_measurement()
    os._exit(code)


def _save_measurement() -> None:
    coverage = sys.modules.get("coverage")
    current = coverage.Coverage.current() if coverage is not None else None
    if current is not None:
        current.stop()
        current.save()


def set_title(name: str) -> None:
    """`<VLLM_PROCESS_NAME_PREFIX>::<name>`, as vLLM's `set_process_title` (vllm-facts.md §6)."""
    try:
        import setproctitle
    except ImportError:  # vLLM silently does nothing without it, and so do we
        return
    prefix = os.environ.get("VLLM_PROCESS_NAME_PREFIX", "VLLM")
    _TITLE[0] = f"{prefix}::{name}"
    setproctitle.setproctitle(_TITLE[0])


def title() -> str:
    """The title `set_title` gave this process ("" before, or without setproctitle)."""
    return _TITLE[0]


class TermPolicy:
    """Records SIGTERM/SIGINT; `due()` says when to act on it (`--sim-ignore-sigterm-s` delays that)."""

    def __init__(self, ignore_s: float = 0.0, immune: bool = False) -> None:
        self.ignore_s = ignore_s
        self.immune = immune
        self.first_at: float | None = None
        self.signal_name = "SIGTERM"

    def install(self) -> int | None:
        """Handle the signals; returns a descriptor that turns readable when one arrives (Python's
        wakeup fd), so a wait can block on it instead of polling the flag (None: immune)."""
        if self.immune:  # --sim-orphans: a stuck child that only SIGKILL removes
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            return None
        signal.signal(signal.SIGTERM, self._record)
        signal.signal(signal.SIGINT, self._record)
        readable, writable = os.pipe()
        os.set_blocking(writable, False)
        os.set_blocking(readable, False)
        signal.set_wakeup_fd(writable)
        return readable

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.first_at is None:
            self.first_at = time.monotonic()
            self.signal_name = signal.Signals(signum).name

    def trigger(self) -> None:
        """A shutdown asked for by the parent (not a signal): act at once."""
        if self.first_at is None:
            self.first_at = time.monotonic() - self.ignore_s

    def due(self) -> bool:
        return self.first_at is not None and time.monotonic() >= self.first_at + self.ignore_s

    def due_in(self) -> float | None:
        """Seconds until a signal already received is acted on (None: none received)."""
        if self.first_at is None:
            return None
        return max(0.0, self.first_at + self.ignore_s - time.monotonic())
