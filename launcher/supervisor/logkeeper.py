"""The log keeper: a small process between vLLM's output pipe and `engine.log` that outlives the
launcher, so vLLM's last lines (its shutdown) reach the file even when the launcher is SIGKILLed.

Run as `python -m launcher.supervisor.logkeeper LOG_PATH`: stdin is vLLM's merged stdout/stderr,
stdout goes back to the launcher (its reader thread, unchanged). Each chunk of whole lines is
masked (`LineRedactor`, the secrets come in this process's environment), cut like the live log's
lines (`LineCutter`), written to the rotated file (`EngineLogFile`) and then passed on. When the
launcher is gone the passing on stops and the file keeps every line. It ignores SIGTERM, SIGINT
and SIGHUP (a terminal's Ctrl-C or systemd's stop must not cut vLLM's shutdown from the log) and
ends by itself at EOF: once vLLM and every process that inherited its pipe have closed it.
Why this design: docs/decisions/0008-log-keeper.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from launcher.redact import SECRET_ENV, LineRedactor, secret_values
from launcher.supervisor.enginelog import EngineLogFile
from launcher.supervisor.linecut import LineCutter, file_text, whole_line_chunks

MODULE = "launcher.supervisor.logkeeper"


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
