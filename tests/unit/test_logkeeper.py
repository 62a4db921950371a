"""The log keeper's copy loop: the file gets every line, masked and cut like the live log's, and
keeps getting them after the launcher's end of the pipe is gone."""

from __future__ import annotations

import fcntl
import io
import os
import subprocess
import sys
from pathlib import Path

from launcher.redact import LineRedactor
from launcher.supervisor.logkeeper import MAX_LINE_CHARS, MODULE, EngineLogFile, cut_marker, keep, main

KEY = "sk-live-4f9a8b7c6d5e"


def test_the_file_keeps_every_line_after_the_launcher_is_gone(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the launcher died: passing lines on fails with EPIPE
    body = "".join(f"INFO line {n}\n" for n in range(1000))
    source = io.BytesIO(f"args: {{'api_key': ['{KEY}']}}\n{body}progress 50%\rtail without end".encode())
    log = EngineLogFile(tmp_path / "engine.log")
    try:
        written = keep(source, log, LineRedactor([KEY]), write_end)
    finally:
        log.close()
        os.close(write_end)
    lines = (tmp_path / "engine.log").read_text().splitlines()
    assert written == len(lines) == 1003
    assert lines[0] == "args: {'api_key': '***'}"
    assert lines[1:1001] == [f"INFO line {n}" for n in range(1000)]
    assert lines[1001:] == ["progress 50%", "tail without end"]


def test_lines_are_forwarded_and_a_long_line_is_cut_in_the_file(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 1 << 20)  # read only at the end: room for it all
    source = io.BytesIO(b"x" * (MAX_LINE_CHARS + 10) + b"\nnext\n")
    log = EngineLogFile(tmp_path / "engine.log")
    try:
        keep(source, log, LineRedactor(), write_end)
    finally:
        log.close()
        os.close(write_end)
    with os.fdopen(read_end, "rb") as forwarded:
        assert forwarded.read() == b"x" * (MAX_LINE_CHARS + 10) + b"\nnext\n"  # the launcher cuts its own
    assert (tmp_path / "engine.log").read_text() == "x" * MAX_LINE_CHARS + cut_marker(10) + "\nnext\n"


def test_a_wrong_call_is_a_usage_error() -> None:
    assert main([]) == 2


def test_a_log_it_cannot_write_still_passes_lines_on_and_says_so(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    run = subprocess.run(
        [sys.executable, "-m", MODULE, str(blocker / "engine.log")],
        input=b"INFO one\nINFO two\n", capture_output=True, timeout=30, check=False,
    )  # fmt: skip
    assert (run.returncode, run.stdout) == (0, b"INFO one\nINFO two\n")
    assert b"bytes not written" in run.stderr and b"Traceback" not in run.stderr
