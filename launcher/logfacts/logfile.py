"""Parse a log file or stdin: read bytes in chunks and feed the same `LogStream` a live log uses."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from launcher.errors import BadInput
from launcher.logfacts.events import LogEvent
from launcher.logfacts.facts import LogFacts
from launcher.logfacts.stream import LogStream

CHUNK_BYTES = 4 * 1024 * 1024


class UnreadableLog(BadInput):
    """The log file named on the command line cannot be opened or read."""


def parse_binary(handle: BinaryIO, markers: Iterable[str] = (), chunk_bytes: int = CHUNK_BYTES,
                 ) -> tuple[LogFacts, list[LogEvent]]:
    stream = LogStream(markers)
    events: list[LogEvent] = []
    while chunk := handle.read(chunk_bytes):
        events += stream.feed(chunk)
    events += stream.close()
    return stream.facts, events


def parse_file(path: str | Path, markers: Iterable[str] = (), chunk_bytes: int = CHUNK_BYTES,
               ) -> tuple[LogFacts, list[LogEvent]]:
    """`path` "-" reads stdin. Raises `UnreadableLog` (exit 2) when the file cannot be read."""
    if str(path) == "-":
        return parse_binary(sys.stdin.buffer, markers, chunk_bytes)
    try:
        with open(path, "rb") as handle:
            return parse_binary(handle, markers, chunk_bytes)
    except OSError as err:
        reason = err.strerror or str(err)
        raise UnreadableLog(f"cannot read log file {str(path)!r}: {reason}") from None
