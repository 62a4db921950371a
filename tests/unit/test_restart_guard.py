"""The restart guard stops retrying a candidate that always fails, and says why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from launcher.host.host_checks import check_restart_guard
from launcher.host.report import CheckStatus
from launcher.host.restart_guard import RestartGuard
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
