"""Off a terminal the bench says one line per stage; on a terminal it draws a bar."""

from __future__ import annotations

import io

from launcher.bench.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_each_stage_is_one_plain_line() -> None:
    out = io.StringIO()
    progress = Progress(10, stream=out)
    progress.stage("short: cold TTFT")
    progress.advance(4)
    progress.stage("short c1: round 1/3")
    assert out.getvalue().splitlines() == [
        "bench: short: cold TTFT (0/10 requests)",
        "bench: short c1: round 1/3 (4/10 requests)",
    ]


def test_on_a_terminal_a_bar_is_redrawn_in_place() -> None:
    out = Terminal()
    progress = Progress(10, stream=out)
    progress.stage("short: cold TTFT")
    assert "\n" not in out.getvalue() and out.getvalue().startswith("\r[")


def test_disabled_progress_writes_nothing() -> None:
    out = io.StringIO()
    Progress(10, stream=out, enabled=False).stage("x")
    assert out.getvalue() == ""
