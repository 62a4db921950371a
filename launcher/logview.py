"""`launch logs`: vLLM's own log and the launcher's history as one time-ordered stream.

vLLM stamps its lines `INFO 12-01 05:57:28 [file.py:N]` in the host's local time, without a year;
tracebacks, uvicorn access lines and tqdm bars carry no stamp and take the last stamp before them
(or, before the first stamp, the first one after). The history's `ts` is UTC. Both are turned into
UTC datetimes so the two sources interleave and `--since` cuts both. Reading streams file by file,
line by line (a rotated engine log is up to 6 × 64 MiB): memory stays bounded.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from launcher.errors import BadInput
from launcher.logfacts.lines import strip_ansi

ROTATED = 5  # RotatingFileHandler backupCount in supervisor/livelog.py
_SINCE_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_STAMP = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)")


@dataclass(frozen=True, slots=True)
class LogLine:
    at: datetime | None  # UTC; None when nothing in the file says when
    source: str  # "engine" or "launch"
    text: str
    record: dict[str, object] | None = None  # a history line's record, as stored


def parse_since(text: str, now: datetime) -> datetime:
    """`10m`, `2h`, `1d`, `30s` ago, or an ISO time (`2026-12-01T06:00:00Z`; no zone = local)."""
    ago = _SINCE_AGO.fullmatch(text.strip())
    if ago:
        return now - timedelta(seconds=float(ago.group(1)) * _UNIT_S[ago.group(2)])
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"--since {text!r} is neither a duration nor a time",
            hint="e.g. --since 10m, 2h, 1d or 2026-12-01T06:00",
        ) from None
    return (when if when.tzinfo else when.astimezone()).astimezone(UTC)


def rotated_files(log: Path) -> list[Path]:
    """The log's rotated predecessors, oldest first (`engine.log.5` … `engine.log.1`)."""
    older = [log.with_name(f"{log.name}.{i}") for i in range(ROTATED, 0, -1)]
    return [p for p in older if p.is_file()]


def vllm_time(stamp: str, reference: datetime) -> datetime | None:
    """`12-01 05:57:28` (local, no year) → UTC, in the year that puts it at or before `reference`."""
    for year in (reference.year, reference.year - 1):
        try:
            local = datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S").astimezone()
        except ValueError:
            return None
        if local <= reference + timedelta(days=1):
            return local.astimezone(UTC)
    return None


class Tail:
    """New lines of one file since the last look; a rotated or truncated file is read from its start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._offset = 0
        self._partial = ""

    def read_new(self) -> list[str]:
        stat = self._stat()
        if stat is None:
            return []
        if stat.st_ino != self._inode or stat.st_size < self._offset:  # rotated or truncated
            self._inode, self._offset, self._partial = stat.st_ino, 0, ""
        if stat.st_size == self._offset:
            return []
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read(min(stat.st_size - self._offset, 4 * 1024 * 1024))
        self._offset += len(data)
        text = self._partial + data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()  # a line still being written waits for its newline
        return lines

    def _stat(self) -> os.stat_result | None:
        try:
            return self.path.stat()
        except OSError:
            return None


class Stamper:
    """Gives each engine line a time: its own stamp, else the last one before it (or the next one,
    for the lines before the first stamp)."""

    def __init__(self) -> None:
        self.last: datetime | None = None
        self.pending: list[str] = []

    def feed(self, text: str, reference: datetime) -> list[LogLine]:
        found = _STAMP.search(strip_ansi(text)[:200])
        stamped = vllm_time(found.group(1), reference) if found else None
        out: list[LogLine] = []
        if stamped is not None:
            self.last = stamped
            out = [LogLine(stamped, "engine", p) for p in self.pending]
            self.pending.clear()
        if self.last is None:
            self.pending.append(text)
            return out
        return [*out, LogLine(self.last, "engine", text)]

    def flush(self) -> list[LogLine]:
        out = [LogLine(None, "engine", p) for p in self.pending]
        self.pending.clear()
        return out


def read_engine(rotated: Iterable[Path], current: Tail | None, stamper: Stamper) -> Iterator[LogLine]:
    """Every line of the rotated files, then of the current one through its `Tail` (so a follow
    goes on exactly where this stops), each with its time."""
    for path in rotated:
        reference = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        with path.open(encoding="utf-8", errors="replace") as handle:
            for raw in handle:
                yield from stamper.feed(raw.rstrip("\n"), reference)
    while current is not None and (lines := current.read_new()):
        reference = datetime.now(UTC)
        for text in lines:
            yield from stamper.feed(text, reference)
    yield from stamper.flush()


def history_line(raw: str, profile: str) -> LogLine | None:
    """One history record of `profile` as a line: time, event, then its fields; else None."""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError:
        return None  # a torn last line
    if not isinstance(record, dict) or record.get("profile") != profile:
        return None
    return LogLine(_history_time(record.get("ts")), "launch", history_text(record), record)


def read_history(tail: Tail, profile: str) -> Iterator[LogLine]:
    while lines := tail.read_new():
        yield from (line for raw in lines if (line := history_line(raw, profile)) is not None)


def history_text(record: dict[str, object]) -> str:
    skip = {"ts", "event", "profile", "gates"}
    fields = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in record.items() if k not in skip)
    gates = record.get("gates")
    if isinstance(gates, list):
        verdicts = [f"{g.get('name')}:{g.get('verdict')}" for g in gates if isinstance(g, dict)]
        fields += f" gates={','.join(verdicts)}"
    return f"{record.get('ts')} {record.get('event')} {fields}".rstrip()


def _history_time(stamp: object) -> datetime | None:
    try:
        return datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def interleave(*streams: Iterable[LogLine]) -> Iterator[LogLine]:
    """Merge time-ordered streams; a line without a time sorts where it stands in its own stream."""
    keyed = [_keyed(stream, i) for i, stream in enumerate(streams)]
    for _, _, _, line in heapq.merge(*keyed):
        yield line


def _keyed(stream: Iterable[LogLine], index: int) -> Iterator[tuple[datetime, int, int, LogLine]]:
    last = datetime.min.replace(tzinfo=UTC)
    for n, line in enumerate(stream):
        last = line.at or last
        yield last, index, n, line


def since(lines: Iterable[LogLine], start: datetime | None) -> Iterator[LogLine]:
    return (line for line in lines if start is None or line.at is None or line.at >= start)


def render(line: LogLine, tagged: bool) -> str:
    return f"{line.source:<6}| {line.text}" if tagged else line.text


def render_json(line: LogLine) -> str:
    """`--json`: one object a line, always these keys — `at` (UTC, ISO 8601, or null when the log does
    not say), `source` (`engine` or `launch`), `text` (the line as `launch logs` prints it), `record`
    (a launcher event's history record as stored; null for vLLM's lines)."""
    at = line.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if line.at is not None else None
    shown = {"at": at, "source": line.source, "text": line.text, "record": line.record}
    return json.dumps(shown, ensure_ascii=False)
