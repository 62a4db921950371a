"""`LogStream`: the one parser, fed a live log or a file in chunks of any size.

Units: a *physical line* ends with `\\n` (its number is what `grep -n` shows); it splits into `\\r`
segments (tqdm redraws, vLLM's `\\r\\n` multi-line messages). Complete lines are scanned in bulk by
the prefilter; the unfinished last line is watched for tqdm bars only, so `capturing_graphs i/N`
events arrive while a bar is drawing. A record cut short by terminal wrapping in a pasted log (a
long engine-config or args line, a KV line) waits for its continuation lines before it is read.
Facts and events do not depend on how the text was chunked (a test feeds every fixture whole,
line by line and in random chunk sizes).
"""

from __future__ import annotations

import codecs
from bisect import bisect_left
from collections.abc import Iterable

from launcher.logfacts import patterns as p
from launcher.logfacts.collector import Collector
from launcher.logfacts.events import LogEvent
from launcher.logfacts.facts import LogFacts
from launcher.logfacts.handlers import banner as is_banner
from launcher.logfacts.joiner import Pending, needs_continuation
from launcher.logfacts.lines import (
    HTML_ENTITY,
    Record,
    leading_proc,
    parse_segment,
    strip_ansi,
    strip_outer,
    unescape_html,
    unglue,
)
from launcher.logfacts.markers import MarkerSet
from launcher.logfacts.prefilter import Prefilter, banner_candidates, open_windows, outcome_lines

_BAR_HINTS = ("Capturing", "checkpoint shards")
MAX_LINE_CHARS = 1024 * 1024  # a longer line is cut there; `lines_cut`/`chars_cut` count what was lost


class LogStream:
    """Incremental vLLM log parser. `feed()` returns the events the new text completed."""

    def __init__(self, markers: Iterable[str] = (), skim: bool = False) -> None:
        """`skim`: startups superseded by a later banner in the same chunk are read for their outcome
        only (see `facts.startups`), and their other events are not emitted: fast on restart loops."""
        marker_set = MarkerSet.build(tuple(markers))
        self._collector = Collector(marker_set)
        self._prefilter = Prefilter(marker_set)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""  # text after the last complete physical line
        self._lines = 0  # complete physical lines consumed
        self._offset = 0  # characters (after colour stripping) consumed
        self._window = 0  # lines still inside a traceback window, carried into the next region
        self._tail_pos = 0  # offset in _buf of the first `\r` segment not yet scanned for bars
        self._tail_segments = 0  # `\r` segments of the unfinished line already scanned for bars
        self._pending: Pending | None = None
        self._skim = skim
        self._dropping = False  # inside a line already cut at MAX_LINE_CHARS: drop until its newline
        self._lines_cut = 0
        self._chars_cut = 0
        self._closed = False

    @property
    def facts(self) -> LogFacts:
        """A snapshot of what the text so far proves (a pending wrapped record is not in it yet)."""
        c = self._collector
        return c.startup.freeze(c.startups_seen, self._lines, c.history, (self._lines_cut, self._chars_cut))

    def feed(self, chunk: str | bytes) -> list[LogEvent]:
        if self._closed:
            raise ValueError("feed() after close()")
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if self._dropping:
            text = self._drop_rest_of_line(text)
        if text:
            work = self._buf + text if self._buf else text
            cut = work.rfind("\n")
            if cut >= 0:
                self._buf = work[cut + 1 :]
                self._tail_pos = 0
                self._region(work, cut + 1)
            else:
                self._buf = work
            if len(self._buf) > MAX_LINE_CHARS:  # a line without end (1 GB without a newline) stays bounded
                self._cut(len(self._buf) - MAX_LINE_CHARS)
                self._buf = self._buf[:MAX_LINE_CHARS]
                self._dropping = True
            self._tail()
        return self._take()

    def _drop_rest_of_line(self, text: str) -> str:
        nl = text.find("\n")
        dropped = len(text) if nl < 0 else nl
        self._chars_cut += dropped
        self._dropping = nl < 0
        return text[dropped:]

    def _cut(self, chars: int) -> None:
        """Count one line cut at MAX_LINE_CHARS (once, however it arrives)."""
        if not self._dropping:
            self._lines_cut += 1
        self._chars_cut += chars

    def close(self) -> list[LogEvent]:
        """Flush: the last line without a newline, and a wrapped record still waiting."""
        if not self._closed:
            self._buf += self._decoder.decode(b"", final=True)
            if self._buf:
                work, self._buf = self._buf + "\n", ""
                self._region(work, len(work))
            self._finish_pending()
            self._closed = True
        return self._take()

    # ---- internals -----------------------------------------------------------------------------
    def _take(self) -> list[LogEvent]:
        events, self._collector.events = self._collector.events, []
        return events

    def _region(self, text: str, end: int) -> None:
        """Parse the complete physical lines `text[:end]`. When skimming, every startup that a later
        banner in the same region supersedes is only skimmed for its outcome (restart loops)."""
        if text.find("\x1b", 0, end) >= 0 or text.find("^[[", 0, end) >= 0:
            text = strip_ansi(text[:end])
            end = len(text)
        if HTML_ENTITY.search(text, 0, end):
            text = unescape_html(text[:end])
            end = len(text)
        banners = self._banners(text, end) if self._skim and not self._prefilter.every_line else []
        if len(banners) < 2:
            self._read(text, 0, end)
            return
        self._read(text, 0, banners[0])
        self._window = 0  # a traceback window does not run into a later startup
        decisive, frames = outcome_lines(text, banners[0], banners[-1])
        for begin, stop in zip(banners, banners[1:], strict=False):
            lines = decisive[bisect_left(decisive, begin) : bisect_left(decisive, stop)]
            if not lines:
                lines = frames[bisect_left(frames, begin) : bisect_left(frames, stop)][:1]
            self._skim_span(text, begin, stop, lines)
        self._read(text, banners[-1], end)

    def _banners(self, text: str, end: int) -> list[int]:
        """Line starts of version banners in `text[:end]`, confirmed as the `version` handler would."""
        out = []
        for pos in banner_candidates(text, 0, end):
            line_end = text.find("\n", pos, end)
            if "] " in text[pos:line_end] and is_banner(parse_segment(strip_outer(text[pos:line_end]))):
                out.append(pos)
        return out

    def _skim_span(self, text: str, start: int, end: int, decisive: list[int]) -> None:
        """One superseded startup: its banner and the lines that decide its outcome, nothing else."""
        base, counted_at, counted = self._lines, start, 0
        for pos in [start, *(at for at in decisive if at != start)]:
            counted += text.count("\n", counted_at, pos)
            counted_at = pos
            self._line(text[pos : text.find("\n", pos, end)], base + counted + 1, 0)
            self._finish_pending()
        self._lines = base + counted + text.count("\n", counted_at, end)
        self._offset += end - start

    def _read(self, text: str, start: int, end: int) -> None:
        """Parse the lines of `text[start:end]` fully: prefilter candidates, traceback windows, and
        every line while a wrapped record waits for its continuation."""
        hits = self._prefilter.scan(text, start, end, self._offset)
        candidates = set(hits.starts)
        self._window = open_windows(text, start, end, hits.tracebacks, self._window, candidates)
        starts = sorted(candidates)
        first_skip, self._tail_segments = self._tail_segments, 0
        base, counted, counted_at = self._lines, 0, start
        pos, idx = start, 0
        while pos < end:
            if self._pending is None:
                idx = bisect_left(starts, pos, idx)
                if idx >= len(starts):
                    break
                pos = starts[idx]
            line_end = text.find("\n", pos, end)
            counted += text.count("\n", counted_at, pos)
            counted_at = pos
            line = text[pos:line_end]
            if self._pending is not None:
                if self._pending.absorb(line):
                    if self._pending.complete:
                        self._finish_pending()
                    pos = line_end + 1
                    continue
                self._finish_pending()
            if pos in candidates:
                self._line(line, base + counted + 1, first_skip if pos == 0 else 0)
            pos = line_end + 1
        self._advance(text, start, end)

    def _advance(self, text: str, start: int, end: int) -> None:
        self._lines += text.count("\n", start, end)
        self._offset += end - start

    def _line(self, line: str, line_no: int, skip_bar_segments: int) -> None:
        if len(line) > MAX_LINE_CHARS:
            self._cut(len(line) - MAX_LINE_CHARS)
            line = line[:MAX_LINE_CHARS]
        segments = strip_outer(line).split("\r")
        last = len(segments) - 1
        for i, segment in enumerate(segments):
            if not segment:
                continue
            if i >= skip_bar_segments:
                self._bars(segment, line_no)
            pieces = unglue(segment)
            for piece in pieces[:-1]:
                self._collector.on_record(parse_segment(piece), line_no)
            rec = parse_segment(pieces[-1])
            if i == last and needs_continuation(rec):
                self._pending = Pending(rec, line_no)
                return
            self._collector.on_record(rec, line_no)

    def _finish_pending(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._collector.on_record(pending.record(), pending.line_no)

    def _tail(self) -> None:
        """Bars in the unfinished line, one `\\r` segment at a time (live progress)."""
        if self._pending is not None:
            return  # keep log order: the waiting record must be read first
        while True:
            r = self._buf.find("\r", self._tail_pos)
            if r < 0:
                return
            segment = strip_ansi(self._buf[self._tail_pos : r])
            if self._tail_segments == 0:
                segment = strip_outer(segment)  # as `_line` does: outer prefixes only start a line
            self._tail_pos = r + 1
            self._tail_segments += 1
            self._bars(segment, self._lines + 1)

    def _bars(self, segment: str, line_no: int) -> None:
        """tqdm bars in one segment; the bar's rank is the prefix the segment starts with, not the
        prefix of a log record glued after the bar."""
        if any(h in segment for h in _BAR_HINTS):
            bar_rec = Record(segment, segment, leading_proc(segment))
            for m in p.BAR.finditer(segment):
                self._collector.on_bar(
                    m.group("desc").strip(), int(m.group("n")), int(m.group("total")), bar_rec, line_no
                )


def parse_text(text: str | bytes, markers: Iterable[str] = ()) -> tuple[LogFacts, list[LogEvent]]:
    """Parse a whole log held in memory (same code path as a live stream)."""
    stream = LogStream(markers)
    events = stream.feed(text)
    events += stream.close()
    return stream.facts, events
