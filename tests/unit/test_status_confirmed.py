"""A status record is believed only while its launcher keeps confirming it: the board's promise
(`confirmed_at`, `confirm_every_s`) on a fake clock, the reader's judgement (`stale_cause`), the
journal's one line per cause, and `launch status` on a record whose live launcher stopped writing.
The real launcher on a full state dir: tests/integration/test_hardening.py."""

from __future__ import annotations

import dataclasses
import errno
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from basis.clock import utc_stamp
from launcher.cli import launch
from launcher.commands.status_cmd import cannot_write
from launcher.errors import BadInput
from launcher.state.metrics import LauncherMetrics
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.supervisor.bookkeeping import Bookkeeping
from launcher.supervisor.status import (
    CONFIRM_SLACK_S,
    MISSED_CONFIRMATIONS,
    Phase,
    Status,
    StatusBoard,
    UnwrittenRecord,
    read_status,
    stale_cause,
)
from tests.doubles import FakeClock

PACE_S = 15.0
BOUND_S = MISSED_CONFIRMATIONS * PACE_S + CONFIRM_SLACK_S


class Disk:
    """The board's write seam: keeps each record written, or refuses with `error` while it is set."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []
        self.error: OSError | None = None

    def write(self, path: Path, text: str) -> None:
        if self.error is not None:
            raise self.error
        self.records.append(json.loads(text))


def serving_board(clock: FakeClock, disk: Disk) -> StatusBoard:
    board = StatusBoard(Path("/state/profiles/svc/status.json"), "svc", write=disk.write, clock=clock)
    board.update(phase=Phase.SERVING)
    return board


def no_problem() -> str | None:
    return None


def full() -> str:
    return "no space left on /state/profiles/svc"


# ---- the writer's promise -------------------------------------------------------------------------
def test_each_write_stamps_when_it_was_confirmed() -> None:
    clock, disk = FakeClock(), Disk()
    serving_board(clock, disk)
    assert disk.records[-1]["confirmed_at"] == utc_stamp(clock.time())
    assert disk.records[-1]["confirm_every_s"] is None  # promoted, the loop has not ticked yet


def test_the_loop_confirms_at_its_pace_and_not_every_tick() -> None:
    clock, disk = FakeClock(), Disk()
    board = serving_board(clock, disk)
    for _ in range(60):  # a minute of serve-loop ticks, one a second
        board.confirm(PACE_S)
        clock.sleep(1.0)
    stamps = [r["confirmed_at"] for r in disk.records[1:]]
    assert len(stamps) == 4, stamps  # at 0, 15, 30 and 45 s: a write when due, never a tick's worth
    assert all(r["confirm_every_s"] == PACE_S for r in disk.records[1:])
    assert len(set(stamps)) == len(stamps)  # each one stamped anew


def test_a_busy_loop_promises_nothing_until_it_ticks_again() -> None:
    clock, disk = FakeClock(), Disk()
    board = serving_board(clock, disk)
    board.confirm(PACE_S)
    board.confirm(None)  # a reload begins
    board.confirm(None)  # a second signal of the same tick: nothing more to say
    assert [r["confirm_every_s"] for r in disk.records[1:]] == [PACE_S, None]
    clock.sleep(600.0)  # a long trial beside production: the record is not judged by its age
    assert stale_cause(disk.records[-1], clock.time(), no_problem) is None
    board.confirm(PACE_S)  # back in the loop
    assert disk.records[-1]["confirm_every_s"] == PACE_S


def test_a_failed_write_is_tried_again_one_pace_later_not_each_tick() -> None:
    clock, disk = FakeClock(), Disk()
    board = serving_board(clock, disk)
    board.confirm(PACE_S)
    disk.error = OSError(errno.ENOSPC, "No space left on device")
    tries = 0
    for _ in range(31):
        try:
            board.confirm(PACE_S)
        except OSError:
            tries += 1
        clock.sleep(1.0)
    assert tries == 2  # at 15 and 30 s


# ---- the reader's judgement, on a fake clock ------------------------------------------------------
def test_a_confirmed_record_goes_stale_once_three_promises_are_missed() -> None:
    clock, disk = FakeClock(), Disk()
    board = serving_board(clock, disk)
    board.confirm(PACE_S)
    record = disk.records[-1]
    clock.sleep(BOUND_S)
    assert stale_cause(record, clock.time(), no_problem) is None  # late, but within the slack
    clock.sleep(1.0)
    assert (
        stale_cause(record, clock.time(), no_problem)
        == f"its record was last confirmed {BOUND_S + 1:.0f} s ago"
    )
    assert stale_cause(record, clock.time(), full) == full()  # what the reader can see, first


def test_the_serving_phases_alone_are_judged_and_an_older_record_is_believed() -> None:
    clock = FakeClock()
    old = {"confirmed_at": utc_stamp(clock.time()), "confirm_every_s": PACE_S}
    clock.sleep(3600.0)
    for phase in ("serving", "serving_last_good"):
        assert stale_cause({**old, "phase": phase}, clock.time(), no_problem) is not None
    for phase in ("starting", "gating", "rolling_back", "stopped", "failed", "parked"):
        assert stale_cause({**old, "phase": phase}, clock.time(), full) is None
    older_launcher = {"phase": "serving", "launcher_pid": 1}  # written before confirmed_at existed
    assert stale_cause(older_launcher, clock.time(), full) is None


def test_a_record_that_promises_nothing_is_stale_only_when_the_dir_cannot_take_a_write() -> None:
    """A disk that filled during a reload: the loop's next promise never reached the record."""
    clock = FakeClock()
    busy = {"phase": "serving", "confirmed_at": utc_stamp(clock.time()), "confirm_every_s": None}
    clock.sleep(3600.0)
    assert stale_cause(busy, clock.time(), no_problem) is None
    assert stale_cause(busy, clock.time(), full) == full()


def test_a_fresh_record_never_asks_the_disk() -> None:
    clock, disk = FakeClock(), Disk()
    board = serving_board(clock, disk)
    board.confirm(PACE_S)

    def must_not_ask() -> str | None:
        raise AssertionError("the state dir was probed for a record within its promise")

    clock.sleep(PACE_S)
    assert stale_cause(disk.records[-1], clock.time(), must_not_ask) is None


# ---- the record's shape ---------------------------------------------------------------------------
def test_every_field_of_the_record_has_its_check() -> None:
    written = {f.name for f in dataclasses.fields(Status)}
    assert written == set(STATUS) | set(STATUS_OPTIONAL)


def test_a_record_without_the_new_fields_reads_and_a_wrong_pace_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    path.write_text('{"phase": "serving", "profile": "svc", "launcher_pid": 1}')
    assert read_status(path) == {"phase": "serving", "profile": "svc", "launcher_pid": 1}
    for pace in ("15", -1, 0, True, float("nan"), float("inf")):
        path.write_text(json.dumps({"phase": "serving", "confirmed_at": "x", "confirm_every_s": pace}))
        with pytest.raises(BadInput, match="confirm_every_s"):
            read_record(path, STATUS, STATUS_OPTIONAL)


# ---- the journal: one line per cause --------------------------------------------------------------
def test_the_journal_hears_once_per_cause_and_once_when_it_is_written_again() -> None:
    said: list[tuple[str, str]] = []
    path = Path("/state/profiles/svc/status.json")
    notice = UnwrittenRecord(path, lambda text, event: said.append((event, text)))
    full_disk = OSError(errno.ENOSPC, "No space left on device", f"{path.parent}/.status.json.1.x.tmp")
    for error in (
        None,
        full_disk,
        full_disk,
        full_disk,
        OSError(errno.EROFS, "Read-only file system"),
        None,
        None,
    ):
        notice.check(error)
    assert said == [
        ("state.status_unwritable", f"cannot write {path}: [Errno 28] No space left on device; "
                                    "launch status will show the state as unknown"),
        ("state.status_unwritable", f"cannot write {path}: [Errno 30] Read-only file system; "
                                    "launch status will show the state as unknown"),
        ("state.status_written", f"{path} is written again: launch status believes it"),
    ]  # fmt: skip


def test_the_books_say_what_holds_a_file_back_until_it_is_written(tmp_path: Path) -> None:
    disk = Disk()
    books = Bookkeeping(lambda _: None, write_file=disk.write)
    status, other = tmp_path / "status.json", tmp_path / "last_good.json"
    books.write_file(status, '{"phase": "serving"}')
    assert books.held_back(status) is None
    disk.error = OSError(errno.ENOSPC, "No space left on device")
    books.write_file(status, '{"phase": "serving"}')
    assert books.held_back(status) is disk.error and books.held_back(other) is None
    disk.error = None
    books.retry()
    assert books.held_back(status) is None


def test_a_metrics_file_that_cannot_be_written_is_said_and_never_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "metrics"
    blocker.write_text("a file where the metrics dir should be")
    metrics = LauncherMetrics(blocker, "svc")
    metrics.update({"phase": "serving"})  # what every transition does
    assert metrics.error is not None and str(blocker) in metrics.error
    assert blocker.read_text() == "a file where the metrics dir should be"


# ---- `launch status` on a record its live launcher stopped confirming ----------------------------
@pytest.fixture
def live_pid() -> Iterator[int]:
    """A live process to play the launcher that wrote the record (it writes nothing)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


def write_record(state: Path, **fields: object) -> None:
    directory = state / "profiles" / "svc"
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "phase": "serving",
        "profile": "svc",
        "serving_fingerprint": "abc",
        "engine_pid": 4242,
        **fields,
    }
    (directory / "status.json").write_text(json.dumps(record))


def status(state: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(launch, ["--state-dir", str(state), "status", "--profile", "svc", *args])
    return result.exit_code, result.output


def test_status_calls_a_record_its_live_launcher_stopped_confirming_unknown(
    state_dir: Path, live_pid: int
) -> None:
    """Was: `svc: serving`, exit 0, for as long as the state dir stayed full."""
    write_record(
        state_dir, launcher_pid=live_pid, confirmed_at="2020-01-01T00:00:00.000000Z", confirm_every_s=15
    )
    code, shown = status(state_dir)
    assert code == 4, shown
    first, *rest = shown.splitlines()
    assert first.startswith(
        "svc: unknown: the launcher could not write its state: its record was last confirmed "
    )
    assert f"last written: serving at 2020-01-01T00:00:00.000000Z by launcher pid {live_pid}" in rest[0]
    code, out = status(state_dir, "--json")
    entry = json.loads(out)["profiles"][0]
    assert code == 4 and entry["phase"] == "unknown" and entry["serving"] is False and entry["url"] is None
    assert entry["stale"].startswith("its record was last confirmed") and entry["recorded_phase"] == "serving"


def test_status_believes_a_record_within_its_promise_and_a_dead_launchers_is_stopped(
    state_dir: Path, live_pid: int
) -> None:
    now = utc_stamp(time.time())  # a stamp, not a timing: the promise is an hour
    write_record(state_dir, launcher_pid=live_pid, confirmed_at=now, confirm_every_s=3600)
    code, shown = status(state_dir)
    assert code == 0 and shown.startswith("svc: serving\n"), shown
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    write_record(state_dir, launcher_pid=int(dead.stdout), confirmed_at="2020-01-01T00:00:00.000000Z",
                 confirm_every_s=15)  # fmt: skip
    code, shown = status(state_dir)
    assert code == 3 and shown.startswith("svc: stopped\n") and "is gone (last phase serving)" in shown


def test_the_reader_names_what_it_sees_of_the_state_dir(tmp_path: Path, live_pid: int) -> None:
    assert cannot_write(tmp_path, live_pid) is None  # room, and writable
    missing = tmp_path / "gone"
    assert cannot_write(missing, live_pid) == f"{missing}: No such file or directory"
