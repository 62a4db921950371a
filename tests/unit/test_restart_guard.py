"""The restart guard stops retrying a candidate that always fails, and says why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.host.host_checks import check_restart_guard
from launcher.host.report import CheckStatus
from launcher.host.restart_guard import RestartGuard, guard_for
from launcher.state.store import StateStore


class Wall:
    """A settable wall clock (the guard counts across processes, in wall-clock seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def guard(state: Path, wall: Wall) -> RestartGuard:
    return RestartGuard(StateStore(state), "prod", max_failures=3, window_s=600, now=wall)


def test_a_candidate_that_always_fails_is_tried_three_times_then_not_again(state_dir: Path) -> None:
    wall = Wall()
    attempts = 0
    while guard(state_dir, wall).should_retry("cand-a"):  # a new guard each time: as after a restart
        attempts += 1
        start = subprocess.run([sys.executable, "-c", "raise SystemExit(1)"], check=False)
        guard(state_dir, wall).record_failure("cand-a", f"engine exited with code {start.returncode}")
        wall.now += 60
        assert attempts <= 10, "the guard never stopped the loop"

    assert attempts == 3
    status = guard(state_dir, wall).status("cand-a")
    assert status.blocked
    assert status.describe().startswith(
        "candidate cand-a failed to start 3 times in 10 min (last: engine exited with code 1)"
    )
    assert status.retry_at == 1_700_000_000.0 + 600
    check = check_restart_guard(status)
    assert check.status is CheckStatus.REFUSED and "not retried before" in check.detail

    assert guard(state_dir, wall).should_retry("cand-b"), "another candidate (a changed profile) starts fresh"
    wall.now = status.retry_at + 1
    assert guard(state_dir, wall).should_retry("cand-a"), "the oldest failure left the window"


def test_a_success_clears_the_count(state_dir: Path) -> None:
    wall = Wall()
    g = guard(state_dir, wall)
    g.record_failure("cand-a", "gate tool_call failed")
    g.record_failure("cand-a", "gate tool_call failed")
    g.record_success("cand-a")
    assert g.status("cand-a").failures == 0
    assert check_restart_guard(g.status("cand-a")).status is CheckStatus.OK


def test_a_corrupt_guard_file_does_not_stop_a_start(state_dir: Path) -> None:
    path = StateStore(state_dir).profile_dir("prod") / "restart_guard.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert guard(state_dir, Wall()).should_retry("cand-a")


@pytest.mark.parametrize("content", ["{not json", '{"cand-a": 5}', '{"cand-a": {"reasons": "x"}}', "[]"])
def test_a_corrupt_guard_file_is_said_then_kept_aside_by_the_next_count(
    state_dir: Path, content: str
) -> None:
    """Was: read as "no failed starts" in silence (and `{"cand-a": 5}` was a crash at the next count).
    Each status says the counts start afresh, preflight warns; the next count keeps the file aside."""
    path = StateStore(state_dir).restart_guard_path("prod")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    wall = Wall()
    status = guard(state_dir, wall).status("cand-a")
    assert status.note is not None and status.note.startswith("restart_guard.json is corrupt (")
    assert status.describe().startswith(status.note) and "counted afresh" in status.note
    assert check_restart_guard(status).status is CheckStatus.WARNING
    assert guard(state_dir, wall).record_failure("cand-a", "gate health failed").failures == 1
    kept = StateStore(state_dir).set_aside_files("prod")
    assert [p.read_text() for p in kept] == [content]
    assert kept[0].name == "restart_guard.json.corrupt-20231114T221320Z"
    fresh = guard(state_dir, wall).status("cand-a")
    assert (fresh.note, fresh.failures) == (None, 1)


def test_a_success_rewrites_a_corrupt_guard_file_too(state_dir: Path) -> None:
    path = StateStore(state_dir).restart_guard_path("prod")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    guard(state_dir, Wall()).record_success("cand-a")
    assert json.loads(path.read_text()) == {}
    assert len(StateStore(state_dir).set_aside_files("prod")) == 1


def test_the_guard_unblocks_exactly_when_the_oldest_counted_failure_leaves_the_window(
    state_dir: Path,
) -> None:
    wall = Wall()
    g = guard(state_dir, wall)
    for _ in range(3):
        g.record_failure("cand-a", "exit 1")
        wall.now += 100
    first = 1_700_000_000.0
    status = g.status("cand-a")
    assert status.blocked and status.retry_at == first + 600
    wall.now = first + 600 - 0.001
    assert not g.should_retry("cand-a"), "a millisecond early: still 3 failures within 600 s"
    wall.now = first + 600
    assert g.should_retry("cand-a"), "a failure exactly window_s old is out of the window"
    assert g.status("cand-a").failures == 2 and g.status("cand-a").retry_at is None


def test_with_more_failures_than_allowed_retry_waits_for_enough_of_them_to_age_out(state_dir: Path) -> None:
    """Five failures, three allowed: the count drops below three only when the third newest leaves."""
    wall = Wall()
    g = guard(state_dir, wall)
    stamps = [wall.now + offset for offset in (0, 10, 20, 30, 40)]
    for stamp in stamps:
        wall.now = stamp
        g.record_failure("cand-a", "exit 1")
    status = g.status("cand-a")
    assert status.failures == 5 and status.retry_at == stamps[2] + 600
    wall.now = stamps[1] + 600
    assert g.status("cand-a").failures == 3 and not g.should_retry("cand-a")
    wall.now = stamps[2] + 600
    assert g.should_retry("cand-a")


def test_failures_outside_the_window_are_forgotten_when_the_next_is_recorded(state_dir: Path) -> None:
    wall = Wall()
    g = guard(state_dir, wall)
    g.record_failure("cand-a", "old")
    wall.now += 601
    status = g.record_failure("cand-a", "new")
    assert status.failures == 1 and status.last_reason == "new"
    stored = json.loads(StateStore(state_dir).restart_guard_path("prod").read_text())
    assert stored["cand-a"]["failures"] == [wall.now], "the stale stamp is dropped from the file"


def test_only_the_five_newest_reasons_are_kept_and_the_newest_is_shown(state_dir: Path) -> None:
    wall = Wall()
    g = guard(state_dir, wall)
    for n in range(7):
        g.record_failure("cand-a", f"reason {n}")
        wall.now += 1
    stored = json.loads(StateStore(state_dir).restart_guard_path("prod").read_text())
    assert stored["cand-a"]["reasons"] == [f"reason {n}" for n in range(2, 7)]
    assert g.status("cand-a").last_reason == "reason 6"


def test_candidates_are_counted_apart_and_a_success_clears_only_its_own(state_dir: Path) -> None:
    wall = Wall()
    g = guard(state_dir, wall)
    for _ in range(3):
        g.record_failure("cand-a", "a")
    g.record_failure("cand-b", "b")
    g.record_success("cand-b")
    assert g.status("cand-a").blocked and g.status("cand-b").failures == 0


def test_a_success_of_a_candidate_never_seen_writes_nothing(state_dir: Path) -> None:
    guard(state_dir, Wall()).record_success("cand-a")
    assert not StateStore(state_dir).restart_guard_path("prod").exists()


def test_a_candidate_never_seen_has_no_failures_and_no_reason(state_dir: Path) -> None:
    status = guard(state_dir, Wall()).status("cand-x")
    assert (status.failures, status.last_reason, status.retry_at, status.blocked) == (0, None, None, False)
    assert status.describe() == "candidate cand-x: 0 failed start(s) of 3 allowed in 10 min"


@pytest.mark.parametrize(
    "content", ["[1, 2, 3]", '"text"', "null", '{"cand-a": {"failures": ["x", null, true]}}']
)
def test_a_guard_file_of_the_wrong_shape_counts_nothing(state_dir: Path, content: str) -> None:
    path = StateStore(state_dir).restart_guard_path("prod")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    g = guard(state_dir, Wall())
    assert g.status("cand-a").failures == 0 and g.should_retry("cand-a")


def test_the_window_is_described_in_minutes_as_given(state_dir: Path) -> None:
    g = RestartGuard(StateStore(state_dir), "prod", max_failures=1, window_s=90, now=Wall())
    assert g.status("c").describe() == "candidate c: 0 failed start(s) of 1 allowed in 1.5 min"
    blocked = g.record_failure("c", "OOM")
    assert blocked.blocked and blocked.describe().startswith(
        "candidate c failed to start 1 times in 1.5 min (last: OOM)"
    )


def test_the_guard_for_a_state_dir_is_the_profiles_file_with_its_limits(state_dir: Path) -> None:
    made = guard_for(state_dir, "prod", 5, 1800)
    assert made.path == StateStore(state_dir).restart_guard_path("prod")
    assert (made.max_failures, made.window_s) == (5, 1800)
