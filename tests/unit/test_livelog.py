"""The live log's cost stays flat: bounded lines, O(1) trimming, readers resume from their position,
one file write per chunk with rotation, and a disk that refuses writes never stops the reader."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

from launcher.supervisor.livelog import TAIL_LINES, KeptLines, LiveLog
from launcher.supervisor.logkeeper import MAX_LINE_CHARS, EngineLogFile, cut_marker


def test_a_reader_resumes_from_its_position_and_skips_what_was_dropped() -> None:
    kept = KeptLines(max_lines=3, max_chars=1000)
    kept.extend(["a", "b"])
    lines, position = kept.since(0)
    assert (lines, position) == (["a", "b"], 2)
    kept.extend(["c", "d", "e", "f"])
    assert kept.since(position) == (["d", "e", "f"], 6)  # "c" left before the reader came back
    assert kept.since(6) == ([], 6)


def test_lines_are_bounded_by_size_as_well_as_by_count() -> None:
    kept = KeptLines(max_lines=1000, max_chars=10)
    kept.extend(["12345", "12345", "1"])
    assert kept.since(0) == (["12345", "1"], 3)
    assert kept.chars == 6


def test_after_the_gates_only_a_tail_is_kept(tmp_path: Path) -> None:
    log = LiveLog(tmp_path / "engine.log")
    log.feed("output", "".join(f"INFO line {i}\n" for i in range(TAIL_LINES * 3)))
    assert len(log.lines_since(0)[0]) == TAIL_LINES * 3
    log.keep_tail()
    log.feed("output", "INFO one more\n")
    lines, end = log.lines_since(0)
    assert len(lines) == TAIL_LINES and end == TAIL_LINES * 3 + 1 and lines[-1] == "INFO one more"
    log.close()
    assert len((tmp_path / "engine.log").read_text().splitlines()) == TAIL_LINES * 3 + 1


def test_a_line_without_end_is_cut_and_counted_without_growing(tmp_path: Path) -> None:
    log = LiveLog(None)
    chunk = "x" * 65536
    tracemalloc.start()
    try:
        for _ in range(320):  # 20 MiB without a newline
            log.feed("output", chunk)
        log.feed("output", "tail\nINFO next line\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024, peak
    lines, _ = log.lines_since(0)
    cut = 320 * 65536 + len("tail") - MAX_LINE_CHARS
    assert lines == ["x" * MAX_LINE_CHARS + cut_marker(cut), "INFO next line"]
    assert (log.cut_lines, log.cut_chars) == (1, cut)


def test_long_lines_inside_one_chunk_are_cut_and_line_ends_survive() -> None:
    log = LiveLog(None)
    long = "y" * (MAX_LINE_CHARS + 10)
    log.feed("output", f"a\r{long}\nb\n")
    log.feed("output", "end without newline")
    log.flush()
    lines, _ = log.lines_since(0)
    assert lines == ["a", "y" * MAX_LINE_CHARS + cut_marker(10), "b", "end without newline"]
    assert log.cut_lines == 1


def test_short_lines_keep_the_old_splitting(tmp_path: Path) -> None:
    log = LiveLog(tmp_path / "engine.log")
    log.feed("output", "Capturing 1/2\rCapturing 2/2\r\nINFO done\npart")
    log.feed("output", "ial\n")
    assert log.lines_since(0) == (["Capturing 1/2", "Capturing 2/2", "INFO done", "partial"], 4)
    assert (log.cut_lines, log.cut_chars) == (0, 0)
    log.close()
    assert (tmp_path / "engine.log").read_text() == "Capturing 1/2\nCapturing 2/2\nINFO done\npartial\n"


def test_the_engine_log_rotates_by_size_and_keeps_the_backups(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "engine.log"
    log = EngineLogFile(path, max_bytes=100, backups=2)
    for index in range(10):
        log.write(f"{index}" * 60 + "\n")
    log.close()
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["engine.log", "engine.log.1", "engine.log.2"]
    assert path.with_name("engine.log.1").read_text() == "8" * 60 + "\n" + "9" * 60 + "\n"
    assert path.read_text() == ""


def test_a_disk_that_refuses_writes_loses_the_chunk_not_the_reader(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    log = LiveLog(blocker / "engine.log")
    log.feed("output", "INFO kept in memory\n")
    assert log.lines_since(0) == (["INFO kept in memory"], 1)
    log.close()


def test_a_line_that_came_while_the_gate_was_checking_ends_the_next_wait_at_once() -> None:
    log = LiveLog(None)
    log.wait_for_change(0)  # the chain's previous wait returned
    log.feed("output", "INFO Application startup complete.\n")  # arrives during the gate's check
    waiter = threading.Thread(target=log.wait_for_change, args=(3600.0,), daemon=True)
    waiter.start()
    waiter.join(timeout=60)  # only a wait that missed the line is still blocked here
    assert not waiter.is_alive(), "the wait missed the line that came during the check"
    log.wait_for_change(0.01)  # nothing new since: a real wait (returns by its timeout)
