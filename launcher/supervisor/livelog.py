"""The engine's live log: split into lines per stream, fed to the log-facts parser, kept for the
gates, written to a rotated file when given a path (a launcher's start leaves the file to the log
keeper, which outlives it: logkeeper.py) — and a condition gates can wait on.

Its cost must stay flat beside an engine that prints for weeks: lines are kept in full only while
the gates run (`keep_tail()` then shrinks them to a short tail), a line longer than
`MAX_LINE_CHARS` is cut (the cut is counted and marked on the line, so an engine writing 200 MB
without a newline never grows the launcher), and the file gets one write per chunk.

The kept lines (`KeptLines`) have absolute positions and are bounded by count and size: a chatty
engine prints ~1,000 lines/s for the server's whole life, so lines go in at the right and the oldest
leave at the left, one `popleft` each (O(1), never a list slice). Positions count every line since
the start, kept or not, so a reader resumes where it stopped even after older lines were dropped.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from launcher.logfacts.events import LogEvent
from launcher.logfacts.stream import LogStream
from launcher.supervisor.logkeeper import LINE_END, EngineLogFile, LineCutter


class KeptLines:
    def __init__(self, max_lines: int, max_chars: int) -> None:
        self._lines: deque[str] = deque()
        self._chars = 0
        self._dropped = 0  # lines that left at the left: the position of the first kept line
        self.max_lines = max_lines
        self.max_chars = max_chars

    @property
    def end(self) -> int:
        """The position after the last line: how many lines were ever added."""
        return self._dropped + len(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def chars(self) -> int:
        return self._chars

    def extend(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._lines.append(line)
            self._chars += len(line)
        self._trim()

    def limit(self, max_lines: int, max_chars: int) -> None:
        """New bounds, applied at once (the gates are done: only a short tail is kept)."""
        self.max_lines, self.max_chars = max_lines, max_chars
        self._trim()

    def since(self, position: int) -> tuple[list[str], int]:
        """The kept lines from `position` on, and the position after them. Lines dropped before a
        reader got to them are skipped. Costs the number of lines returned, not the number kept."""
        count = self.end - max(position, self._dropped)
        if count <= 0:
            return [], self.end
        newest_first = list(islice(reversed(self._lines), count))
        newest_first.reverse()
        return newest_first, self.end

    def _trim(self) -> None:
        while self._lines and (len(self._lines) > self.max_lines or self._chars > self.max_chars):
            self._chars -= len(self._lines.popleft())
            self._dropped += 1


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
