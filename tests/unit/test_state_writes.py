"""Atomic writes and history appends against a disk that fills up: the write seam returns short
counts or ENOSPC; a record is never torn, a killed writer's temp file is removed by the next run,
and the serve loop's bookkeeping keeps what failed and writes it once there is room."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.atomicfile import append_line, read_bytes_nofollow, remove_stray_temps, write_atomic
from launcher.supervisor.bookkeeping import Bookkeeping
from launcher.supervisor.history import Event, History


class FillingDisk:
    """os.write's shape: writes at most `chunk` bytes a call, then ENOSPC once `room` is used."""

    def __init__(self, room: int, chunk: int = 7) -> None:
        self.room, self.chunk = room, chunk

    def __call__(self, fd: int, data: bytes) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        part = data[: min(self.chunk, self.room)]
        self.room -= len(part)
        return os.write(fd, part)


def test_short_writes_are_completed(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    append_line(path, '{"a": 1}', write=FillingDisk(room=10_000, chunk=3))
    write_atomic(tmp_path / "s.json", "x" * 100, write=FillingDisk(room=10_000, chunk=5))
    assert path.read_text() == '{"a": 1}\n' and (tmp_path / "s.json").read_text() == "x" * 100


def test_enospc_mid_record_cuts_the_partial_record_off_and_the_next_one_is_whole(tmp_path: Path) -> None:
    """Was: a short write tore the record and glued the next one to it (both lost)."""
    path = tmp_path / "history.jsonl"
    append_line(path, '{"n": 1}')
    with pytest.raises(OSError):
        append_line(path, '{"n": 2, "pad": "' + "x" * 50 + '"}', write=FillingDisk(room=20))
    assert path.read_text() == '{"n": 1}\n'
    append_line(path, '{"n": 3}')
    assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [1, 3]


def test_a_torn_tail_from_a_crash_is_closed_before_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"ts": "t", "event": "start"}\n{"ts": "t", "eve')
    History(path).append(Event.PROMOTED, profile="p")
    scan = History(path).scan()
    assert [r["event"] for r in scan.records] == ["start", "promoted"] and len(scan.skipped) == 1


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "status.json"
    target.write_text("old")
    with pytest.raises(OSError):
        write_atomic(target, "new" * 100, write=FillingDisk(room=10))
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]


def test_a_symlinked_profile_is_written_through_when_asked(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text("a")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    write_atomic(link, "b", follow_links=True)
    assert link.is_symlink() and real.read_text() == "b"


def test_a_state_file_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    """Was: a planted `STATE/history.jsonl -> /elsewhere` was appended to outside the state dir."""
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "history.jsonl").symlink_to(outside)
    (state / "status.json").symlink_to(outside)
    with pytest.raises(OSError) as err:
        append_line(state / "history.jsonl", '{"a": 1}')
    assert err.value.errno == errno.ELOOP
    for attempt in (
        lambda: write_atomic(state / "status.json", "x"),
        lambda: read_bytes_nofollow(state / "status.json"),
    ):
        with pytest.raises(OSError) as err:
            attempt()
        assert err.value.errno == errno.ELOOP
    (state / "profiles").symlink_to(tmp_path, target_is_directory=True)  # a directory on the way
    with pytest.raises(OSError) as err:
        write_atomic(state / "profiles" / "p" / "status.json", "x")
    assert err.value.errno == errno.ELOOP
    assert outside.read_text() == "keep\n" and not (tmp_path / "p").exists()


def test_a_state_read_refuses_a_fifo_and_a_huge_file(tmp_path: Path) -> None:
    fifo = tmp_path / "status.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as err:
        read_bytes_nofollow(fifo)  # opened without blocking, refused as not a regular file
    assert err.value.errno == errno.EINVAL
    big = tmp_path / "last_good.json"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(OSError) as err:
        read_bytes_nofollow(big, limit=1024)
    assert err.value.errno == errno.EFBIG


def test_a_sigkilled_writers_temp_file_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import os; print(os.getpid())"]
    dead = subprocess.run(argv, capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    left = tmp_path / f".status.json.{dead_pid}.k2j4_x.tmp"
    live = tmp_path / f".status.json.{os.getpid()}.abcd.tmp"
    other = tmp_path / ".not-ours.tmp"
    for path in (left, live, other):
        path.write_text("half")
    assert remove_stray_temps(tmp_path, lambda pid: pid == os.getpid()) == [left]
    assert live.exists() and other.exists()


class FlakyWriter:
    def __init__(self) -> None:
        self.full = True
        self.files: dict[Path, str] = {}
        self.lines: list[str] = []

    def write_file(self, path: Path, text: str) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        self.files[path] = text

    def append(self, path: Path, line: str) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        self.lines.append(line)


def test_bookkeeping_keeps_failed_writes_tells_systemd_once_and_catches_up_in_order() -> None:
    told: list[str] = []
    disk = FlakyWriter()
    books = Bookkeeping(told.append, write_file=disk.write_file, append=disk.append)
    status = Path("/state/status.json")
    books.write_file(status, "gating")
    books.append_line(Path("/state/history.jsonl"), "one")
    books.write_file(status, "serving")
    books.append_line(Path("/state/history.jsonl"), "two")
    assert books.pending == 3 and len(told) == 1 and "still serving" in told[0]
    disk.full = False
    books.retry()
    assert disk.lines == ["one", "two"] and disk.files == {status: "serving"} and books.pending == 0
    assert told[-1] == "state writes work again"
