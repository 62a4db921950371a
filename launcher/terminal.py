"""What the operator's terminal wants: colour unless `NO_COLOR` is set (https://no-color.org);
whether a stream is systemd's journal, which reads a `<N>` priority prefix on each line; a
diagnostics stream whose reader may leave; an answer stream whose refusals are said; one line that
rewrites itself on a terminal; and standard descriptors that were closed at start."""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Any, TextIO

from launcher.errors import OutputLost


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


class LiveLine:
    """One line on a terminal that rewrites itself (`\r`, padded over the last text: no escape
    sequence a dumb terminal would print), cleared at the end; on a pipe, a file or the journal,
    nothing at all, so a script's stderr gets no carriage returns."""

    def __init__(self, stream: TextIO, width: int | None = None) -> None:
        self._stream = stream
        self._shown = 0
        try:
            self.enabled = stream.isatty()
        except (OSError, ValueError):  # a closed stream
            self.enabled = False
        self._width = width if width is not None else _columns(stream) - 1  # the last column wraps

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        line = text[: self._width]
        self._stream.write("\r" + line.ljust(self._shown))
        self._stream.flush()
        self._shown = len(line)

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r" + " " * self._shown + "\r")
            self._stream.flush()
            self._shown = 0


def _columns(stream: TextIO) -> int:
    """The terminal's width; 80 where it does not say (a new pseudo-terminal says 0)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return 80
    return max(20, columns) if columns > 0 else 80


class _Wrapped:
    """What a wrapped standard stream passes through unchanged: its descriptor, whether it is a
    terminal, and that it is written to."""

    _stream: IO[Any]

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True


class DiagnosticStream(_Wrapped):
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
            except OSError:  # a closed pipe, and as much a full disk: diagnostics are not worth a crash
                self.reader_gone = True
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except OSError:
                self.reader_gone = True


class AnswerStream(_Wrapped):
    """stdout as the commands write it: a write its descriptor refuses (a full disk, a descriptor
    closed at start, an I/O error) raises `OutputLost`, which the CLI edge turns into one line and
    exit 74 instead of a bug report. A closed pipe stays `BrokenPipeError`, the reader's choice (141)."""

    def __init__(self, stream: IO[Any]) -> None:
        self._stream = stream
        self.encoding = getattr(stream, "encoding", None)  # click.echo uses a stream as it is when
        self.errors = getattr(stream, "errors", None)  # these match
        binary = getattr(stream, "buffer", None)  # bytes (click's shell completion) are guarded too
        self.buffer = AnswerStream(binary) if binary is not None else None

    def write(self, data: Any) -> int:
        try:
            return int(self._stream.write(data))
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputLost(err) from err

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputLost(err) from err


def reopen_closed_standard_streams() -> None:
    """A descriptor 0, 1 or 2 closed at start (`launch status <&- >&-`) leaves Python's stream None,
    and the next file opened would take its number: a state file could become an engine's stdout.
    Each one closed is filled with /dev/null: stdin reads nothing, stderr drops its lines, and stdout
    is opened read-only, so that a write fails as on the closed descriptor (EBADF) and is said."""
    filled = ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_RDONLY), (2, "stderr", os.O_WRONLY))
    for fd, name, flags in filled:
        if getattr(sys, name) is not None:
            continue
        devnull = os.open(os.devnull, flags)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
        stream = open(fd, "r" if fd == 0 else "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - lives on
        setattr(sys, name, stream)
