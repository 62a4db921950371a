"""The engine's live log: split into lines per stream, fed to the log-facts parser, kept for the
gates, written to a rotated file when given a path (a launcher's start leaves the file to the log
keeper, which outlives it: logkeeper.py) — and a condition gates can wait on.

Its cost must stay flat beside an engine that prints for weeks: lines are kept in full only while
the gates run (`keep_tail()` then shrinks them to a short tail), a line longer than
`MAX_LINE_CHARS` is cut (the cut is counted and marked on the line, so an engine writing 200 MB
without a newline never grows the launcher), and the file gets one write per chunk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.logfacts.events import LogEvent
from launcher.logfacts.stream import LogStream
from launcher.supervisor.enginelog import EngineLogFile
from launcher.supervisor.keptlines import KeptLines
from launcher.supervisor.linecut import LINE_END, MAX_LINE_CHARS, LineCutter, cut_marker

__all__ = ["MAX_LINE_CHARS", "LiveLog", "cut_marker"]  # the cap lives in linecut (the keeper shares it)

EventSink = Callable[[LogEvent], None]
# While gating: enough for any startup log (a real 0.26 start is ~1,000 lines) and for a reader that
# falls far behind (gates read on every change); afterwards: a tail for the record.
GATING_LINES, GATING_CHARS = 50_000, 8 * 1024 * 1024
TAIL_LINES, TAIL_CHARS = 2_000, 512 * 1024


class LiveLog:
    def __init__(
        self, log_path: Path | None, on_event: EventSink | None = None, markers: Sequence[str] = ()
    ) -> None:
        self._stream = LogStream(markers=list(markers))
        self._kept = KeptLines(GATING_LINES, GATING_CHARS)
        self._cutter = LineCutter()
        self._changed = threading.Condition()
        self._version = 0  # bumped by every change a waiting gate should see
        self._seen_version = 0  # the version when wait_for_change last returned
        self._on_event = on_event
        self._file = EngineLogFile(log_path) if log_path is not None else None

    @property
    def cut_lines(self) -> int:
        """Lines longer than MAX_LINE_CHARS."""
        return self._cutter.cut_lines

    @property
    def cut_chars(self) -> int:
        """Characters dropped from them."""
        return self._cutter.cut_chars

    def feed(self, stream: str, chunk: str) -> None:
        """Called from the reader thread with raw chunks. Only complete lines (ending in '\n', or
        tqdm's '\r') go to the parser, so streams never interleave inside a line."""
        self._accept(self._cutter.feed(stream, chunk))

    def flush(self) -> None:
        """The engine is gone: whatever was left without a line end is a line too."""
        for complete in self._cutter.flush():
            self._accept(complete)

    def _accept(self, complete: str) -> None:
        if not complete:
            return
        lines = [line for line in LINE_END.split(complete) if line]
        with self._changed:
            events = self._stream.feed(complete)
            self._kept.extend(lines)
            self._version += 1
            self._changed.notify_all()
        if self._file is not None and lines:
            self._file.write("\n".join(lines) + "\n")
        if self._on_event is not None:
            for event in events:
                self._on_event(event)

    def keep_tail(self) -> None:
        """The gates are done with this start: keep only a short tail from now on."""
        with self._changed:
            self._kept.limit(TAIL_LINES, TAIL_CHARS)

    def notify(self) -> None:
        """Wake waiting gates (the engine exited, or a stop was asked)."""
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    # --- gates.context.LogView ---
    def facts(self) -> Mapping[str, Any]:
        with self._changed:
            return self._stream.facts.to_json()

    def lines_since(self, position: int) -> tuple[Sequence[str], int]:
        with self._changed:
            return self._kept.since(position)

    def wait_for_change(self, timeout_s: float) -> None:
        """A change that came while the gate was checking (after the last wait returned) ends this
        wait at once: a bare Condition.wait would miss it, and the gate would sleep a whole poll_s
        (up to 0.5 s of gate overhead) though the line it waits for is already there."""
        with self._changed:
            if self._version == self._seen_version:
                self._changed.wait_for(lambda: self._version != self._seen_version, timeout=timeout_s)
            self._seen_version = self._version

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
