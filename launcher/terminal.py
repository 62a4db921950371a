"""What the operator's terminal wants: colour unless `NO_COLOR` is set (https://no-color.org);
whether a stream is systemd's journal, which reads a `<N>` priority prefix on each line; and a
diagnostics stream whose reader may leave."""

from __future__ import annotations

import io
import os
from typing import TextIO


def colour_allowed() -> bool:
    """False when `NO_COLOR` is set to anything but the empty string, as the convention says."""
    return not os.environ.get("NO_COLOR")


def is_journal(stream: TextIO) -> bool:
    """systemd sets JOURNAL_STREAM to `device:inode` of the unit's stdout/stderr stream; a stream
    redirected elsewhere has another inode, even though it inherited the variable."""
    wanted = os.environ.get("JOURNAL_STREAM", "")
    if not wanted:
        return False
    try:
        stat = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return wanted == f"{stat.st_dev}:{stat.st_ino}"


class DiagnosticStream:
    """stderr as the launcher's threads write it: once its reader has gone (`launch try 2>&1 | head
    -1`, a restarted journal), lines are dropped instead of raising BrokenPipeError into whichever
    thread logged — a log reader or a serve loop that died of it would leave the engine unwatched.
    stdout is the command's answer and is not wrapped: its closed pipe ends the command (cli.py)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False
        self.encoding = stream.encoding  # click.echo uses a stream as it is when these match
        self.errors = stream.errors

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self.reader_gone = True
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self.reader_gone = True

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True
