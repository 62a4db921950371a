"""The engine's log on disk, and the log keeper: a small process between vLLM's output pipe and
`engine.log` that outlives the launcher, so vLLM's last lines (its shutdown) reach the file even
when the launcher is SIGKILLed.

Run as `python -m launcher.supervisor.logkeeper LOG_PATH`: stdin is vLLM's merged stdout/stderr,
stdout goes back to the launcher (its reader thread, unchanged). Each chunk of whole lines is
masked (`LineRedactor`, the secrets come in this process's environment), cut (`LineCutter`),
written to the rotated file (`EngineLogFile`) and then passed on. When the launcher is gone the
passing on stops and the file keeps every line. It ignores SIGTERM, SIGINT and SIGHUP (a terminal's
Ctrl-C or systemd's stop must not cut vLLM's shutdown from the log) and ends by itself at EOF: once
vLLM and every process that inherited its pipe have closed it. It is started for every engine, so
this module imports only the standard library and `launcher.redact`.
Why this design: docs/decisions/0008-log-keeper.md.

Lines are cut here for both readers of a pipe, the keeper and the launcher's live log (livelog.py):
both must cut the same line the same way (a line longer than `MAX_LINE_CHARS` is cut, the cut
counted and marked on it), and both read in whole lines so a secret split across two reads is still
masked.

The file is written once per chunk and rotated by size. Why not `logging.handlers.RotatingFileHandler`:
it formats, locks and checks the size once per record, ~23 µs a line, 30 times the parser's own cost
on a chatty engine. Here a chunk of lines is one `write` of bytes, and the size check is a sum. A
full or read-only disk never stops the keeper (the engine would block on a pipe nobody drains): the
chunk is counted as lost, and the next chunk tries again.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from launcher.redact import SECRET_ENV, LineRedactor, secret_values

LINE_END = re.compile(r"\r\n|\r|\n")
LINE_END_KEPT = re.compile(r"(\r\n|\r|\n)")
# vLLM's longest lines (the engine config, the non-default args) are under 8 KiB.
MAX_LINE_CHARS = 64 * 1024
_MAX_PARTIAL = 1 << 20  # a "line" longer than this is passed on unended (bounded memory)
MAX_BYTES = 64 * 1024 * 1024  # engine.log is rotated at this size …
BACKUPS = 5  # … into engine.log.1 … engine.log.5 (oldest)
MODULE = "launcher.supervisor.logkeeper"  # `python -m MODULE LOG_PATH` runs the keeper


def cut_marker(cut: int) -> str:
    return f" [vllm-gate: {cut} characters cut]"


def whole_line_chunks(stream: IO[bytes]) -> Iterator[str]:
    """Decoded text ending at a line end ('\\n', or tqdm's '\\r'), read until EOF; an unended run
    over 1 MiB and the unended tail at EOF come out as they are."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character split by a read
    partial = ""
    while chunk := stream.read1(65536):  # type: ignore[attr-defined]
        text = partial + decoder.decode(chunk)
        cut = max(text.rfind("\n"), text.rfind("\r"))
        if cut < 0 and len(text) < _MAX_PARTIAL:
            partial = text
            continue
        end = cut + 1 if cut >= 0 else len(text)
        partial = text[end:]
        yield text[:end]
    if partial:
        yield partial


def file_text(complete: str) -> str:
    """Complete lines as the engine log stores them: one per line, empty ones dropped."""
    lines = [line for line in LINE_END.split(complete) if line]
    return "\n".join(lines) + "\n" if lines else ""


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


class LineCutter:
    """Chunks in, complete lines out (per stream, so streams never interleave inside a line)."""

    def __init__(self) -> None:
        self._unfinished: dict[str, _Unfinished] = {}
        self.cut_lines = 0  # lines longer than MAX_LINE_CHARS
        self.cut_chars = 0  # characters dropped from them

    def feed(self, stream: str, chunk: str) -> str:
        """The complete lines this chunk ends ('' while a line is still open), each capped."""
        unfinished = self._unfinished.setdefault(stream, _Unfinished())
        cut = max(chunk.rfind("\n"), chunk.rfind("\r"))
        if cut < 0:
            unfinished.add(chunk)
            return ""
        head, carried = unfinished.head, unfinished.cut
        self._unfinished[stream] = rest = _Unfinished()
        rest.add(chunk[cut + 1 :])
        return self._cap(head + chunk[: cut + 1], carried)

    def flush(self) -> list[str]:
        """The source is gone: whatever was left without a line end is a line too."""
        left = [u for u in self._unfinished.values() if u.head]
        self._unfinished.clear()
        return [self._cap(u.head + "\n", u.cut) for u in left]

    def _cap(self, complete: str, carried_cut: int) -> str:
        """Each line at most MAX_LINE_CHARS, with a marker saying how much was cut; line ends kept."""
        if not carried_cut and len(complete) <= MAX_LINE_CHARS:
            return complete
        parts = LINE_END_KEPT.split(complete)
        for index in range(0, len(parts), 2):
            line = parts[index]
            cut = max(0, len(line) - MAX_LINE_CHARS) + (carried_cut if index == 0 else 0)
            if cut:
                parts[index] = line[:MAX_LINE_CHARS] + cut_marker(cut)
                self.cut_lines += 1
                self.cut_chars += cut
        return "".join(parts)


class EngineLogFile:
    """`engine.log`, then `engine.log.1` … `engine.log.5` (oldest), like RotatingFileHandler."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._file: BinaryIO | None = None
        self._size = 0
        self.lost_bytes = 0  # not written: the disk refused them
        self.last_error: str | None = None

    def write(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        try:
            if self._file is None:
                self._open()
            assert self._file is not None
            written = self._file.write(data) or 0
            self._size += written
            self.lost_bytes += len(data) - written
            if self._size >= self.max_bytes:
                self._rotate()
        except OSError as err:
            self.lost_bytes += len(data)
            self.last_error = f"{self.path}: {err.strerror or err}"
            self.close()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115  (kept open across writes)
        self._size = self._file.seek(0, os.SEEK_END)

    def _rotate(self) -> None:
        self.close()
        for index in range(self.backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
        if self.backups > 0:
            os.replace(self.path, f"{self.path}.1")
        else:
            self.path.unlink(missing_ok=True)
        self._open()


def start_keeper(log_path: Path, engine_env: Mapping[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """The keeper, reading a new pipe, and that pipe's write end (for vLLM's stdout; the caller
    closes it once vLLM holds it). Its own session: neither the launcher's terminal nor a `killpg`
    of the engine reaches it; no parent-death signal: it ends at EOF, after vLLM's last line. It
    gets the engine's secrets (to mask them) and the launcher's environment (to import itself)."""
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    env.update((k, v) for k, v in engine_env.items() if k in SECRET_ENV)
    try:
        keeper = subprocess.Popen(
            [sys.executable, "-m", MODULE, str(log_path)],
            env=env,
            stdin=read_end,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as err:
        os.close(write_end)
        from launcher.errors import BadInput

        raise BadInput(f"cannot start the engine's log keeper: {err.strerror or err}") from err
    finally:
        os.close(read_end)
    return keeper, write_end


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def keep(source: IO[bytes], log: EngineLogFile, redact: Callable[[str], str], forward_fd: int | None) -> int:
    """Copies `source` to the log (and to `forward_fd` while it is open) until EOF; the lines
    written to the file."""
    cutter = LineCutter()
    written = 0
    for text in whole_line_chunks(source):
        text = redact(text)
        stored = file_text(cutter.feed("output", text))
        if stored:
            log.write(stored)  # the file first: it is what survives
            written += stored.count("\n")
        if forward_fd is not None:
            try:
                _send(forward_fd, text.encode("utf-8", errors="replace"))
            except OSError:  # the launcher is gone (EPIPE): the file still gets every line
                forward_fd = None
    for complete in cutter.flush():
        stored = file_text(complete)
        log.write(stored)
        written += stored.count("\n")
    return written


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m launcher.supervisor.logkeeper LOG_PATH", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    log = EngineLogFile(Path(args[0]))
    try:
        keep(sys.stdin.buffer, log, LineRedactor(secret_values(os.environ)), sys.stdout.fileno())
    finally:
        log.close()
    if log.lost_bytes:  # said on the launcher's stderr (the journal under systemd), if still open
        with contextlib.suppress(OSError):
            note = f"vllm-gate log keeper: {log.lost_bytes} bytes not written: {log.last_error}"
            print(note, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
