"""Restart loops and hostile sizes: every startup reported, skimming changes no fact, lines bounded."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import launch
from launcher.logfacts import LogStream, parse_binary, parse_text
from launcher.logfacts.facts import StartupSummary
from launcher.logfacts.history import KEEP, History
from launcher.logfacts.stream import MAX_LINE_CHARS

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted((DATA / "real-vllm-0.26").glob("*.log"))
CORPUS = sorted((DATA / "logs").glob("*.log"))


def _loop(times: int) -> bytes:
    """The recorded real logs one after another, as a `Restart=always` unit's journal holds them."""
    return b"".join(p.read_bytes() for p in REAL) * times


def _skimmed(text: bytes) -> dict[str, object]:
    stream = LogStream(skim=True)
    stream.feed(text)
    stream.close()
    return stream.facts.to_json()


@pytest.mark.parametrize(
    "text", [_loop(3), b"".join(p.read_bytes() for p in CORPUS * 2)], ids=["real-0.26-loop", "corpus-loop"]
)
def test_skimming_superseded_startups_changes_no_fact(text: bytes) -> None:
    assert _skimmed(text) == parse_text(text)[0].to_json()


def test_every_startup_is_reported_with_its_outcome() -> None:
    facts = parse_binary(io.BytesIO(_loop(5)), events=False)[0]
    per_pass = len(REAL)
    assert facts.startups_seen == 5 * per_pass == len(facts.startups)
    assert facts.startup_outcomes == {"failed:free_memory": 5, "ready": 5 * (per_pass - 1)}
    first = facts.startups[0]
    assert (first.line_no, first.vllm_version, first.outcome, first.failure_kind) == (
        3,
        "0.26.0",
        "failed",
        "free_memory",
    )  # free-memory.log sorts first; its banner is line 3
    assert [s.line_no for s in facts.startups] == sorted(s.line_no or 0 for s in facts.startups)


def test_summaries_are_bounded_and_totals_are_not() -> None:
    banner = b"INFO 12-20 20:25:46 api_server.py:528] vLLM API server version 0.6.4\n"
    fail = b"ValueError: No available memory for the cache blocks.\n"
    facts = parse_binary(io.BytesIO((banner + fail) * (KEEP + 50)), events=False)[0]
    assert len(facts.startups) == KEEP and facts.startups[-1].line_no == 2 * (KEEP + 50) - 1
    assert facts.startup_outcomes == {"failed:kv_cache_too_small": KEEP + 50}


def test_a_line_without_end_stays_bounded_and_is_counted() -> None:
    chunk = b"x" * (1024 * 1024)
    stream = LogStream()
    tracemalloc.start()
    try:
        for _ in range(24):
            stream.feed(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * 1024 * 1024  # the 24 MiB line is not held
    stream.feed(b"\nINFO 12-20 20:25:46 api_server.py:528] vLLM API server version 0.6.4\n")
    stream.close()
    facts = stream.facts
    assert (facts.lines_cut, facts.chars_cut) == (1, 24 * 1024 * 1024 - MAX_LINE_CHARS)
    assert facts.vllm_version == "0.6.4" and facts.lines_read == 2


def test_a_long_line_the_parser_reads_is_cut_too() -> None:
    """Whole in one chunk, a line is read only if it is a candidate; one that is gets cut the same."""
    head = "ValueError: No available memory for the cache blocks. "
    facts = parse_text(head + "y" * MAX_LINE_CHARS + "\n")[0]
    assert (facts.lines_cut, facts.chars_cut) == (1, len(head))
    assert facts.failure_kind == "kv_cache_too_small"
    assert facts.failure_line is not None and len(facts.failure_line) == MAX_LINE_CHARS


def test_parse_log_refuses_a_device_and_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, word in (("/dev/zero", "device"), (str(fifo), "FIFO"), (str(tmp_path), "directory")):
        result = CliRunner().invoke(launch, ["parse-log", path])
        assert result.exit_code == 2, result.output
        assert word in result.stderr and "Traceback" not in result.output + result.stderr


def test_parse_log_reports_the_restart_loop(tmp_path: Path) -> None:
    log = tmp_path / "loop.log"
    log.write_bytes(_loop(2))
    result = CliRunner().invoke(launch, ["parse-log", str(log)])
    assert result.exit_code == 0
    assert f"{2 * len(REAL)} in this log (failed:free_memory 2, ready {2 * (len(REAL) - 1)})" in result.stdout


def test_parse_log_refuses_dev_zero_on_stdin() -> None:
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(
            [sys.executable, "-m", "launcher.cli", "parse-log", "-"],
            stdin=zero,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2 and "device" in proc.stderr and "Traceback" not in proc.stderr


# ---- the history of startups, one decision at a time ---------------------------------------------------


def summary(line_no: int, outcome: str | None, kind: str | None = None) -> StartupSummary:
    return StartupSummary(line_no, "0.26.0", outcome, kind, line_no + 40 if kind else None)


def test_each_startup_is_labelled_by_its_outcome_and_a_failure_by_its_kind() -> None:
    history = History()
    for s in (summary(1, "failed", "free_memory"), summary(50, "ready"), summary(90, None)):
        history.add(s)
    recent, totals = history.with_current(summary(130, "failed", "oom"))
    assert totals == {"failed:free_memory": 1, "failed:oom": 1, "ready": 1, "unknown": 1}
    assert list(totals) == sorted(totals)  # stable order for the report and the JSON
    assert [s.line_no for s in recent] == [1, 50, 90, 130]


def test_the_startup_being_read_counts_without_being_added() -> None:
    history = History()
    history.add(summary(1, "ready"))
    first = history.with_current(summary(2, "ready"))
    again = history.with_current(summary(2, "ready"))
    assert first == again and first[1] == {"ready": 2} and history.total == 1
    assert history.with_current(None) == ([summary(1, "ready")], {"ready": 1})


def test_the_kept_summaries_drop_the_oldest_first_with_the_current_one_included() -> None:
    history = History()
    for k in range(KEEP + 3):
        history.add(summary(k, "failed", "kv_cache_too_small"))
    recent, totals = history.with_current(summary(10**6, "ready"))
    assert len(recent) == KEEP and recent[0].line_no == 4 and recent[-1].line_no == 10**6
    assert totals == {"failed:kv_cache_too_small": KEEP + 3, "ready": 1} and history.total == KEEP + 3
