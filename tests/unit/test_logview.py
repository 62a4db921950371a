"""`launch logs`' reading: vLLM's stamps to UTC, unstamped lines, interleaving, --since, tailing."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from launcher.errors import BadInput
from launcher.logview import (
    LogLine,
    Stamper,
    Tail,
    history_line,
    interleave,
    parse_since,
    read_engine,
    rotated_files,
    since,
    vllm_time,
)

REAL = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "free-memory.log"
NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)


def local(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").astimezone().astimezone(UTC)


def test_since_takes_durations_and_times_and_refuses_the_rest() -> None:
    assert parse_since("10m", NOW) == NOW - timedelta(minutes=10)
    assert parse_since("2h", NOW) == NOW - timedelta(hours=2)
    assert parse_since("1.5d", NOW) == NOW - timedelta(hours=36)
    assert parse_since("2026-12-01T05:00:00Z", NOW) == datetime(2026, 12, 1, 5, 0, tzinfo=UTC)
    assert parse_since("2026-12-01T05:00", NOW) == local("2026-12-01 05:00:00")
    for bad in ("yesterday", "10 minutes", "", "-5m"):
        with pytest.raises(BadInput, match="--since"):
            parse_since(bad, NOW)


def test_vllm_stamps_have_no_year_and_are_local_time() -> None:
    assert vllm_time("11-29 09:37:25", NOW) == local("2026-11-29 09:37:25")
    # a log written on 2027-01-01 00:10 that began on 31 December belongs to the year before
    assert vllm_time("12-31 23:59:00", datetime(2027, 1, 1, 0, 10, tzinfo=UTC)) == local(
        "2026-12-31 23:59:00"
    )
    assert vllm_time("13-45 99:00:00", NOW) is None


def test_a_traceback_takes_the_time_of_the_stamped_line_before_it() -> None:
    stamper = Stamper()
    lines = [
        "nothing stamped yet",
        "(EngineCore pid=1) ERROR 11-29 09:37:25 [core.py:1330] Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "(APIServer pid=2) INFO 11-29 09:37:27 [api_server.py:1] Shutting down",
    ]
    out = [line for text in lines for line in stamper.feed(text, NOW)] + stamper.flush()
    assert [x.text for x in out] == lines
    at = local("2026-11-29 09:37:25")
    assert [x.at for x in out] == [at, at, at, at + timedelta(seconds=2)]


def test_a_real_log_reads_whole_in_order_with_a_time_on_every_line(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(REAL.read_bytes())
    read = list(read_engine([], Tail(log), Stamper()))
    assert [x.text for x in read] == REAL.read_text(encoding="utf-8").splitlines()
    times = [x.at for x in read]
    assert None not in times and times == sorted(times)  # type: ignore[type-var]


def test_rotated_files_come_oldest_first(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    for name in ("engine.log.2", "engine.log.1", "engine.log", "engine.log.9"):
        (tmp_path / name).write_text("x\n")
    assert [p.name for p in rotated_files(log)] == ["engine.log.2", "engine.log.1"]


def test_history_records_of_the_profile_become_lines() -> None:
    record = {"ts": "2026-12-01T05:59:00.000001Z", "event": "rejected", "profile": "prod", "reason": "smoke"}
    line = history_line(json.dumps(record), "prod")
    assert line is not None and line.source == "launch" and line.at == datetime(2026, 12, 1, 5, 59, 0, 1, UTC)
    assert line.text == '2026-12-01T05:59:00.000001Z rejected reason="smoke"'
    assert history_line(json.dumps({**record, "profile": "other"}), "prod") is None
    assert history_line('{"ts": "2026-12-01T05:5', "prod") is None  # a torn last line


def test_interleave_orders_by_time_and_since_cuts_both() -> None:
    t = NOW
    engine = [LogLine(t, "engine", "a"), LogLine(t + timedelta(seconds=2), "engine", "c")]
    launch = [
        LogLine(t + timedelta(seconds=1), "launch", "b"),
        LogLine(t + timedelta(seconds=3), "launch", "d"),
    ]
    assert [x.text for x in interleave(engine, launch)] == ["a", "b", "c", "d"]
    cut = since(interleave(engine, launch), t + timedelta(seconds=2))
    assert [x.text for x in cut] == ["c", "d"]


def test_tail_reads_only_whole_new_lines_and_starts_over_after_rotation(tmp_path: Path) -> None:
    path = tmp_path / "engine.log"
    tail = Tail(path)
    assert tail.read_new() == []  # not written yet
    path.write_text("one\ntw")
    assert tail.read_new() == ["one"]
    with path.open("a") as out:
        out.write("o\nthree\n")
    assert tail.read_new() == ["two", "three"]
    os.rename(path, tmp_path / "engine.log.1")  # what RotatingFileHandler does
    path.write_text("four\n")
    assert tail.read_new() == ["four"]
