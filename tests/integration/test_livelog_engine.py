"""A real engine process that writes 64 MiB without a newline does not grow the launcher's log
path: the line is cut and counted, the pipe keeps draining, and the next line arrives intact."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import pytest

from launcher.supervisor.engine import EngineProcess
from launcher.supervisor.livelog import LiveLog
from launcher.supervisor.logkeeper import MAX_LINE_CHARS

pytestmark = pytest.mark.integration

FLOOD = (
    "import sys\n"
    "block = b'z' * (1 << 20)\n"
    "for _ in range(64):\n"
    "    sys.stdout.buffer.write(block)\n"
    "sys.stdout.buffer.write(b'\\nINFO after the flood\\n')\n"
)


def test_an_engine_writing_64_mib_without_a_newline_is_cut_not_kept(tmp_path: Path) -> None:
    log = LiveLog(tmp_path / "engine.log")
    engine = EngineProcess([sys.executable, "-c", FLOOD], {"PATH": "/usr/bin:/bin"}, sink=log.feed)
    tracemalloc.start()
    try:
        engine.start()
        assert engine.exited.wait(timeout=60), "the flood never ended: the pipe stopped draining?"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        engine.stop(grace_s=5)
        log.flush()
        log.close()
    lines, _ = log.lines_since(0)
    assert [line[:40] for line in lines] == ["z" * 40, "INFO after the flood"]
    assert len(lines[0]) < MAX_LINE_CHARS + 100
    assert (log.cut_lines, log.cut_chars) == (1, 64 * (1 << 20) - MAX_LINE_CHARS)
    assert peak < 8 * 1024 * 1024, f"the log path held {peak / 1e6:.0f} MB at its peak"
    assert (tmp_path / "engine.log").stat().st_size < MAX_LINE_CHARS + 1000
