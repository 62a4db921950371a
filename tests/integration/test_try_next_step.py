"""`launch try` never promotes: its report ends with what to do next, serve it or fix it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH, free_port, write_profile

pytestmark = pytest.mark.integration


def test_a_try_ends_with_the_next_step(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    write_profile(profiles, "bad", free_port(), args={"sim_capture_fallback": True})
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(tmp_path / "state"), "try"]
    passed = subprocess.run(
        [*argv, "--profile", "svc"], capture_output=True, text=True, timeout=120, check=False
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.splitlines()[-1].startswith("next: `launch --profile svc` serves it")
    failed = subprocess.run(
        [*argv, "--profile", "bad"], capture_output=True, text=True, timeout=120, check=False
    )
    assert failed.returncode == 1
    assert failed.stdout.splitlines()[-1] == (
        "next: fix the profile (`launch --profile bad --dry-run` checks it), then try again"
    )
