"""The engine's live log: split into lines per stream, fed to the log-facts parser, kept for the
gates, written to a rotated file in the state dir — and a condition gates can wait on.

Its cost must stay flat beside an engine that prints for weeks: lines are kept in full only while
the gates run (`keep_tail()` then shrinks them to a short tail), a line longer than
`MAX_LINE_CHARS` is cut (the cut is counted and marked on the line, so an engine writing 200 MB
without a newline never grows the launcher), and the file gets one write per chunk.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.logfacts.events import LogEvent
from launcher.logfacts.stream import LogStream
from launcher.supervisor.enginelog import EngineLogFile
from launcher.supervisor.keptlines import KeptLines

EventSink = Callable[[LogEvent], None]
LINE_END = re.compile(r"\r\n|\r|\n")
LINE_END_KEPT = re.compile(r"(\r\n|\r|\n)")
# vLLM's longest lines (the engine config, the non-default args) are under 8 KiB.
MAX_LINE_CHARS = 64 * 1024
# While gating: enough for any startup log (a real 0.26 start is ~1,000 lines) and for a reader that
# falls far behind (gates read on every change); afterwards: a tail for the record.
GATING_LINES, GATING_CHARS = 50_000, 8 * 1024 * 1024
TAIL_LINES, TAIL_CHARS = 2_000, 512 * 1024


def cut_marker(cut: int) -> str:
    return f" [vllm-gate: {cut} characters cut]"


@dataclass
class _Unfinished:
    """The start of a line whose end has not arrived: at most MAX_LINE_CHARS kept, the rest counted."""

    head: str = ""
    cut: int = 0

    def add(self, text: str) -> None:
        room = MAX_LINE_CHARS - len(self.head)
        if room > 0:
            self.head += text[:room]
        self.cut += max(0, len(text) - max(room, 0))


class LiveLog:
    def __init__(
        self, log_path: Path | None, on_event: EventSink | None = None, markers: Sequence[str] = ()
    ) -> None:
        self._stream = LogStream(markers=list(markers))
        self._kept = KeptLines(GATING_LINES, GATING_CHARS)
        self._unfinished: dict[str, _Unfinished] = {}
        self._changed = threading.Condition()
        self._version = 0  # bumped by every change a waiting gate should see
        self._seen_version = 0  # the version when wait_for_change last returned
        self._on_event = on_event
        self._file = EngineLogFile(log_path) if log_path is not None else None
        self.cut_lines = 0  # lines longer than MAX_LINE_CHARS
        self.cut_chars = 0  # characters dropped from them

    def feed(self, stream: str, chunk: str) -> None:
        """Called from the reader thread with raw chunks. Only complete lines (ending in '\n', or
        tqdm's '\r') go to the parser, so streams never interleave inside a line."""
        unfinished = self._unfinished.setdefault(stream, _Unfinished())
        cut = max(chunk.rfind("\n"), chunk.rfind("\r"))
        if cut < 0:
            unfinished.add(chunk)
            return
        head, carried = unfinished.head, unfinished.cut
        self._unfinished[stream] = rest = _Unfinished()
        rest.add(chunk[cut + 1 :])
        self._accept(head + chunk[: cut + 1], carried)

    def flush(self) -> None:
        """The engine is gone: whatever was left without a line end is a line too."""
        left = [u for u in self._unfinished.values() if u.head]
        self._unfinished.clear()
        for unfinished in left:
            self._accept(unfinished.head + "\n", unfinished.cut)

    def _accept(self, complete: str, carried_cut: int = 0) -> None:
        if not complete:
            return
        if carried_cut or len(complete) > MAX_LINE_CHARS:
            complete = self._cap_lines(complete, carried_cut)
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

    def _cap_lines(self, complete: str, carried_cut: int) -> str:
        """Each line at most MAX_LINE_CHARS, with a marker saying how much was cut; line ends kept."""
        parts = LINE_END_KEPT.split(complete)
        for index in range(0, len(parts), 2):
            line = parts[index]
            cut = max(0, len(line) - MAX_LINE_CHARS) + (carried_cut if index == 0 else 0)
            if cut:
                parts[index] = line[:MAX_LINE_CHARS] + cut_marker(cut)
                self.cut_lines += 1
                self.cut_chars += cut
        return "".join(parts)

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
