"""State writes that never take serving down: a full or read-only state dir is bookkeeping, and a
healthy engine is not stopped over it (before this, one ENOSPC on SIGHUP left nothing serving).

A failed write is logged, told to systemd (`STATUS=`) and kept; `retry()` (the serve loop calls it
every tick) and every later write try again. Whole-file writes keep only the newest content per
file; history lines keep their order and are never dropped while the launcher lives. Writers
on two threads (the serve loop and the stop-on-signal thread) take turns: one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import structlog

from launcher.atomicfile import append_line, write_atomic

log = structlog.get_logger("vllm-gate")
MAX_QUEUED_LINES = 10_000  # a day of history, at worst; older queued lines are counted, then dropped


class Bookkeeping:
    def __init__(
        self,
        tell_systemd: Callable[[str], object],
        write_file: Callable[[Path, str], None] = write_atomic,
        append: Callable[[Path, str], None] = append_line,
    ) -> None:
        self._tell = tell_systemd
        self._write_file = write_file
        self._append = append
        self._files: dict[Path, str] = {}
        self._lines: list[tuple[Path, str]] = []
        self._lock = threading.RLock()
        self.failures = 0
        self.last_error: str | None = None
        self._failure: OSError | None = None  # the last write's error, while writes fail

    @property
    def pending(self) -> int:
        return len(self._files) + len(self._lines)

    def held_back(self, path: Path) -> OSError | None:
        """What keeps `path`'s newest content off the disk (the error of the last write tried), or
        None when it is written."""
        with self._lock:
            return self._failure if path in self._files else None

    def write_file(self, path: Path, text: str) -> None:
        """Atomic whole-file write; on failure the newest content waits for `retry()`."""
        with self._lock:
            self._files[path] = text
            self.retry()

    def append_line(self, path: Path, line: str) -> None:
        """History append; queued behind any earlier line that could not be written yet."""
        with self._lock:
            self._lines.append((path, line))
            if len(self._lines) > MAX_QUEUED_LINES:
                del self._lines[0]
            self.retry()

    def retry(self) -> None:
        """Write what waits, oldest history line first; stops at the first failure."""
        with self._lock:
            self._retry()

    def _retry(self) -> None:
        was_failing = self.last_error is not None
        try:
            while self._lines:
                path, line = self._lines[0]
                self._append(path, line)
                self._lines.pop(0)
            for path in list(self._files):
                self._write_file(path, self._files[path])
                del self._files[path]
        except OSError as err:
            self._failed(err)
            return
        self._failure = None
        if was_failing:
            self.last_error = None
            log.info("state writes work again", pending=0)
            self._tell("state writes work again")

    def _failed(self, err: OSError) -> None:
        self.failures += 1
        self._failure = err
        error = f"{err.filename or 'state dir'}: {err.strerror or err}"
        first = self.last_error is None or not self.last_error.endswith(f": {err.strerror or err}")
        self.last_error = error
        if first:  # once per kind of error (ENOSPC, EROFS…), not once per file or tick
            log.error("state write failed; still serving, will retry", error=error, pending=self.pending)
            self._tell(f"still serving; state writes failing ({error}), will retry")
