"""The parallel run's gate (tests/parallel.py): an `alone` test excludes every other, others share."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.parallel import RunGate


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[RunGate]:
    gate = RunGate(tmp_path)
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
    gate: RunGate, tmp_path: Path
) -> None:
    gate.enter(alone=False)
    assert can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    assert not can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_EX)
    assert can_take(tmp_path, "parallel-turnstile.lock", fcntl.LOCK_EX)  # the turnstile is passed, not held
    gate.leave(keep=False)
    assert can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_EX)


def test_an_alone_test_keeps_everyone_out_and_keeps_its_turn_for_the_next_alone_one(
    gate: RunGate, tmp_path: Path
) -> None:
    gate.enter(alone=True)
    assert not can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    assert not can_take(tmp_path, "parallel-turnstile.lock", fcntl.LOCK_EX)  # newcomers wait at the turnstile
    gate.leave(keep=True)
    assert not can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    gate.enter(alone=True)
    gate.leave(keep=False)
    assert can_take(tmp_path, "parallel-run.lock", fcntl.LOCK_SH)
    assert can_take(tmp_path, "parallel-turnstile.lock", fcntl.LOCK_EX)
