"""State files an attacker (or an accident) put in place, issue 42: entries in the profile's reloads
dir that are not requests. Each with the real `launch` serving `vllm-sim`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration


def rollback(launcher: Launcher, tag: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "rollback", tag, "--profile", launcher.profile, "--timeout-s", "60"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)


def plant_junk(reloads: Path, outside: Path) -> list[Path]:
    """A directory, a link, a FIFO and a 16 MiB sparse file where requests and control requests go."""
    reloads.mkdir(parents=True, exist_ok=True)
    junk = [
        reloads / "dir.request",
        reloads / "link.request",
        reloads / "pipe.control",
        reloads / "huge.control",
    ]
    junk[0].mkdir()
    (junk[0] / "inside").write_text("x")
    junk[1].symlink_to(outside)
    os.mkfifo(junk[2])
    with junk[3].open("wb") as huge:
        huge.truncate(16 << 20)
    return junk


def test_entries_that_are_not_requests_are_skipped_and_said_and_the_engine_serves_on(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    """Was: a directory `reloads/X.request` made every reload exit 70 and stop the engine; a FIFO
    `X.control` would have hung the serve loop on its open."""
    launcher = launcher_factory()
    path = write_profile(launcher.profiles, "svc", free_port())
    shutil.copy(path, path.with_name("svc.toml.bak_same"))
    launcher.start()
    serving = launcher.wait_phase("serving")
    outside = tmp_path / "outside.txt"
    outside.write_text("not the launcher's\n")
    junk = plant_junk(launcher.state / "profiles" / "svc" / "reloads", outside)
    result = rollback(launcher, "same")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"already serving {serving['serving_fingerprint']}" in result.stdout
    launcher.signal(signal.SIGHUP)  # `kill -HUP`, no request of its own
    after = launcher.wait_for(lambda s: s.get("reload_seq") == 2)
    assert after["phase"] == "serving" and after["engine_pid"] == serving["engine_pid"]
    said = launcher.output()
    for entry, what in zip(
        junk, ("a directory", "a symbolic link", "a FIFO", "over 4096 bytes"), strict=True
    ):
        assert f"{entry.name}: {what}" in said, (entry, said)
    assert all(os.path.lexists(entry) for entry in junk[:3])  # left for the operator, never followed
    assert not junk[3].exists()  # a control request too large to read: answered invalid and removed
    assert outside.read_text() == "not the launcher's\n"
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
