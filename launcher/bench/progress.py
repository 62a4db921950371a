"""Progress on stderr: a one-line bar on a TTY (at most ten redraws a second), else one plain line
per stage, so a bench under systemd or in CI is not silent for a minute.

Drawn from the event loop between requests (never per chunk), so it cannot disturb timestamps.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 28
MIN_REDRAW_S = 0.1


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.lines = enabled is None and not self.stream.isatty()
        self.total = max(1, total)
        self.done = 0
        self.label = ""
        self._drawn = 0.0

    def stage(self, label: str) -> None:
        self.label = label
        if self.lines:
            self.stream.write(f"bench: {label} ({self.done}/{self.total} requests)\n")
            self.stream.flush()
        self._draw(force=True)

    def advance(self, count: int = 1) -> None:
        self.done += count
        self._draw()

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn < MIN_REDRAW_S and self.done < self.total:
            return
        self._drawn = now
        filled = min(WIDTH, WIDTH * self.done // self.total)
        bar = "#" * filled + "-" * (WIDTH - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {self.label[:40]:<40}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (WIDTH + 60) + "\r")
            self.stream.flush()
