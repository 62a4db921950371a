"""The parallel run's isolation (tests/parallel.py): the alone window moves the other workers aside
(priority, CPUs) and gives the window back; where it cannot, an `alone` test excludes every other."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.parallel import LOWERED_NICE, AloneWindow, RunLock, busy_cpus


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[RunLock]:
    gate = RunLock(tmp_path)
    gate.open()
    yield gate
    gate.close()


def can_take(directory: Path, name: str, mode: int) -> bool:
    """Whether another worker (another open file: flocks are per open file) would get this lock now."""
    with (directory / name).open("ab") as other:
        try:
            fcntl.flock(other, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True


def test_a_shared_holder_lets_others_share_and_keeps_an_exclusive_one_out(
    gate: RunLock, tmp_path: Path
) -> None:
    gate.enter(exclusive=False)
    assert can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    assert not can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_EX)
    assert can_take(tmp_path, "parallel-turnstile.lock", fcntl.LOCK_EX)  # the turnstile is passed, not held
    gate.leave(keep=False)
    assert can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_EX)


def test_an_alone_test_keeps_everyone_out_and_keeps_its_turn_for_the_next_alone_one(
    gate: RunLock, tmp_path: Path
) -> None:
    gate.enter(exclusive=True)
    assert not can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    assert not can_take(tmp_path, "parallel-turnstile.lock", fcntl.LOCK_EX)  # newcomers wait at the turnstile
    gate.leave(keep=True)
    assert not can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    gate.enter(exclusive=True)
    gate.leave(keep=False)
    assert can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    assert can_take(tmp_path, "parallel-turnstile.lock", fcntl.LOCK_EX)


@dataclass
class FakeCpu:
    """A worker's scheduling, recorded: the real one (OwnThreads) would change this test's worker."""

    all_cpus: set[int] = field(default_factory=lambda: {0, 1})
    start_nice: int = 0
    niceness: int = 0
    on: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.niceness = self.start_nice
        self.on = set(self.all_cpus)

    def cpus(self) -> set[int]:
        return set(self.all_cpus)

    def nice(self) -> int:
        return self.niceness

    def lower_priority(self) -> None:
        self.niceness = max(LOWERED_NICE, self.niceness)

    def run_on(self, cpus: set[int]) -> None:
        self.on = set(cpus)


def test_the_owner_keeps_its_priority_and_cpus_while_the_others_stand_aside_until_it_is_done(
    tmp_path: Path,
) -> None:
    owner_cpu, other_cpu = FakeCpu(), FakeCpu()
    owner = AloneWindow(tmp_path, True, owner_cpu)
    other = AloneWindow(tmp_path, True, other_cpu)
    assert other.enter(alone=False) is False  # the other worker's first test may come first
    assert other_cpu.niceness == LOWERED_NICE and other_cpu.on == {1}
    assert owner.enter(alone=True) is True and owner.enter(alone=True) is True
    assert owner_cpu.niceness == 0 and owner_cpu.on == {0, 1}
    assert not can_take(tmp_path, "alone-window.lock", fcntl.LOCK_SH)
    other.enter(alone=False)
    assert other_cpu.on == {1}  # the window is open: still aside
    owner.close()
    assert owner_cpu.niceness == LOWERED_NICE and can_take(tmp_path, "alone-window.lock", fcntl.LOCK_EX)
    other.enter(alone=False)
    assert other_cpu.on == {0, 1} and other_cpu.niceness == LOWERED_NICE  # every CPU back; nice stays


def test_the_owners_first_non_alone_test_closes_the_window(tmp_path: Path) -> None:
    owner_cpu = FakeCpu()
    owner = AloneWindow(tmp_path, True, owner_cpu)
    owner.enter(alone=True)
    assert owner.enter(alone=False) is False
    assert owner_cpu.niceness == LOWERED_NICE and can_take(tmp_path, "alone-window.lock", fcntl.LOCK_EX)
    assert owner.enter(alone=True) is False  # a late `alone` test is no longer protected: it locks


@pytest.mark.parametrize("cpu", [FakeCpu(all_cpus={3}), FakeCpu(start_nice=10)], ids=["one-cpu", "niced-run"])
def test_an_owner_that_cannot_be_ahead_of_the_others_leaves_its_tests_to_the_lock(
    tmp_path: Path, cpu: FakeCpu
) -> None:
    owner = AloneWindow(tmp_path, True, cpu)
    assert owner.enter(alone=True) is False  # RunLock then takes it exclusively
    other_cpu = FakeCpu(all_cpus=set(cpu.all_cpus))
    AloneWindow(tmp_path, True, other_cpu).enter(alone=False)
    one_cpu = len(cpu.all_cpus) == 1
    assert other_cpu.on == (cpu.all_cpus if one_cpu else cpu.all_cpus - {min(cpu.all_cpus)})


def test_an_alone_test_elsewhere_than_first_is_not_protected_and_a_run_without_any_changes_nothing(
    tmp_path: Path,
) -> None:
    late_cpu = FakeCpu()
    late = AloneWindow(tmp_path, True, late_cpu)
    late.enter(alone=False)
    assert late.enter(alone=True) is False
    plain_cpu = FakeCpu()
    plain = AloneWindow(tmp_path / "x", False, plain_cpu)
    assert plain.enter(alone=False) is False
    assert plain_cpu.niceness == 0 and plain_cpu.on == {0, 1}


STAT_BEFORE = """cpu  1000 0 500 8000 100 0 0 0 0 0
cpu0 500 0 250 4000 50 0 0 0 0 0
cpu1 500 0 250 4000 50 0 0 0 0 0
intr 1
"""


def _stat_after(busy: int, idle: int, iowait: int = 0, steal: int = 0) -> str:
    return STAT_BEFORE.replace(
        "cpu  1000 0 500 8000 100 0 0 0 0 0",
        f"cpu  {1000 + busy} 0 500 {8000 + idle} {100 + iowait} 0 0 {steal} 0 0",
    )


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (_stat_after(busy=0, idle=60), 0.0),  # an idle host
        (_stat_after(busy=30, idle=30), 1.0),  # one of two CPUs busy: another job
        (_stat_after(busy=0, idle=30, iowait=30), 0.0),  # waiting on the disk is not CPU
        (_stat_after(busy=0, idle=30, steal=30), 1.0),  # another guest had the CPU
        (STAT_BEFORE, 0.0),  # no time passed
    ],
)
def test_how_busy_the_host_was_reads_in_cpus(after: str, expected: float) -> None:
    assert busy_cpus(STAT_BEFORE, after) == pytest.approx(expected)
