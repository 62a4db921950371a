"""Parse a log file or stdin: read bytes in chunks and feed the same `LogStream` a live log uses."""

from __future__ import annotations

import os
import stat
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


def _refuse_endless(st: os.stat_result, name: str, stdin: bool) -> None:
    """Only what ends can be parsed: a regular file, or a pipe into stdin (its writer ends it). A
    device (/dev/zero never ends), a named FIFO (opening it waits for a writer), a directory or a
    socket is refused before it is opened."""
    mode = st.st_mode
    if stat.S_ISREG(mode) or (stdin and (stat.S_ISFIFO(mode) or sys.stdin.isatty())):
        return
    if stat.S_ISDIR(mode):
        why = "it is a directory"
    elif stat.S_ISFIFO(mode):
        why = "it is a named pipe (FIFO), which may never end"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        why = "it is a device, which may never end (/dev/zero never does)"
    else:
        why = "it is not a regular file"
    raise UnreadableLog(
        f"cannot read log file {name}: {why}; nothing was read. Give a regular file, or "
        "pipe the log in: `cat LOG | launch parse-log -`"
    )


def parse_binary(
    handle: BinaryIO, markers: Iterable[str] = (), chunk_bytes: int = CHUNK_BYTES, events: bool = True
) -> tuple[LogFacts, list[LogEvent]]:
    """`events=False`: facts only (and an empty list): superseded startups are skimmed for their
    outcome and no event is kept, so a restart loop of any size parses fast in flat memory."""
    stream = LogStream(markers, skim=not events)
    kept: list[LogEvent] = []
    while chunk := handle.read(chunk_bytes):
        got = stream.feed(chunk)
        if events:
            kept += got
    got = stream.close()
    return stream.facts, kept + got if events else []


def parse_file(
    path: str | Path, markers: Iterable[str] = (), chunk_bytes: int = CHUNK_BYTES, events: bool = True
) -> tuple[LogFacts, list[LogEvent]]:
    """`path` "-" reads stdin. Raises `UnreadableLog` (exit 2) when the file cannot be read."""
    if str(path) == "-":
        try:
            st = os.fstat(sys.stdin.fileno())
        except (OSError, ValueError):  # io.UnsupportedOperation: an in-memory stream, which ends
            st = None
        if st is not None:
            _refuse_endless(st, "standard input", stdin=True)
        return parse_binary(sys.stdin.buffer, markers, chunk_bytes, events)
    try:
        _refuse_endless(os.stat(path), repr(str(path)), stdin=False)
        with open(path, "rb") as handle:
            return parse_binary(handle, markers, chunk_bytes, events)
    except OSError as err:
        reason = err.strerror or str(err)
        raise UnreadableLog(f"cannot read log file {str(path)!r}: {reason}") from None
