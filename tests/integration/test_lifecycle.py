"""The attempt lifecycle with a real process group: the GPU locks go with the engine, and are let
go only once its whole group is gone (serve, try and probe all start engines this way)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gates.context import LogView
from launcher.procgroup import group_members
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.supervisor.attempt import launch_attempt
from launcher.supervisor.progress import Progress
from tests.launcher_run import write_profile
from tests.unit.test_lifecycle import RecordingLocks

pytestmark = pytest.mark.integration

# An engine with a worker of its own, as vLLM's API server has its engine core.
ENGINE = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print('INFO engine up', flush=True)\n"
    "time.sleep(60)\n"
)


def test_the_engine_holds_its_gpu_locks_until_its_group_is_gone(profiles_dir: Path, tmp_path: Path) -> None:
    write_profile(profiles_dir, "svc", 18998)
    candidate = replace(
        Candidate.from_plan(build_plan(profiles_dir, "svc")), argv=(sys.executable, "-c", ENGINE)
    )
    locks = RecordingLocks()
    attempt = launch_attempt(candidate, tmp_path / "engine.log", Progress(), gpu_locks=locks)
    try:
        assert locks.events == ["take svc"]
        assert _saw(attempt.log, "engine up", deadline=time.monotonic() + 10.0)
    finally:
        report = attempt.stop(grace_s=5.0)
    assert locks.events == ["take svc", "release svc"]
    assert report.leftovers == () and attempt.engine.pgid is not None
    assert group_members(attempt.engine.pgid) == []


def _saw(log: LogView, text: str, *, deadline: float) -> bool:
    position = 0
    while time.monotonic() < deadline:
        lines, position = log.lines_since(position)
        if any(text in line for line in lines):
            return True
        log.wait_for_change(timeout_s=0.2)
    return False
