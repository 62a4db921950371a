"""State files an attacker (or an accident) put in place, issue 42: entries in the profile's reloads
dir that are not requests. Each with the real `launch` serving `vllm-sim`."""

from __future__ import annotations

import json
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


def status_of(launcher: Launcher) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "status", "--profile", launcher.profile]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_a_corrupt_rejected_list_is_kept_aside_said_and_retries_nothing(
    launcher_factory: LauncherFactory,
) -> None:
    """Was: a corrupt rejected.json was ignored in silence, so a start tried the candidate it may have
    listed. Now the file is kept aside as `rejected.json.corrupt-<time>`, the start serves last-good
    and says why, and `--retry-rejected` tries the candidate as for any rejected launch."""
    launcher = launcher_factory()
    port = free_port()
    write_profile(launcher.profiles, "svc", port)
    launcher.start()
    good = launcher.wait_phase("serving")["serving_fingerprint"]
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    write_profile(launcher.profiles, "svc", port, args={"max_num_seqs": 2})  # the change, never judged here
    rejected = launcher.state / "profiles" / "svc" / "rejected.json"
    rejected.write_text('{"c83f388e24ed7ced": {"reason": "gate tool_call: fail", "at": "2026-12-0')  # torn
    launcher.start()
    status = launcher.wait_phase("serving_last_good")
    assert status["serving_fingerprint"] == good
    reason = status["rollback_reason"]
    assert "not known to have passed" in reason and "rejected.json is corrupt" in reason, reason
    assert "--retry-rejected" in reason
    kept = sorted(rejected.parent.glob("rejected.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text().endswith('"at": "2026-12-0')
    shown = status_of(launcher)
    assert shown.returncode == 6, shown.stdout + shown.stderr
    assert f"kept aside: {kept[0].name}" in shown.stdout, shown.stdout
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 3
    launcher.start()  # the decision holds: the list now names the candidate
    assert "not known to have passed" in launcher.wait_phase("serving_last_good")["rollback_reason"]
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 3
    launcher.start("--retry-rejected")
    promoted = launcher.wait_phase("serving")["serving_fingerprint"]
    assert promoted != good
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_a_corrupt_restart_guard_is_a_preflight_warning_not_silence(tmp_path: Path) -> None:
    """Was: a corrupt restart_guard.json read as "no failed starts", silently; one whose entry had the
    wrong type was a bug report (exit 70). Now preflight warns, naming the file, and counts afresh."""
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    guard = state / "profiles" / "svc" / "restart_guard.json"
    guard.parent.mkdir(parents=True)
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state)]
    fingerprint = subprocess.run([*argv, "--profile", "svc", "--dry-run", "--json"], capture_output=True,
                                 text=True, timeout=60, check=True).stdout  # fmt: skip
    fp = json.loads(fingerprint)["fingerprint"]
    for body, why in (("{not json", "line 1"), (json.dumps({fp: {"failures": 3}}), "wrong type")):
        guard.write_text(body)
        run = subprocess.run([*argv, "preflight", "--profile", "svc"], capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        row = next(line for line in run.stdout.splitlines() if " restart_guard " in line)
        assert row.lstrip().startswith("warning") and "restart_guard.json is corrupt" in row, run.stdout
        assert why in row and "counted afresh" in row, row
        assert guard.read_text() == body  # preflight reads; the next count keeps it aside


def test_a_fifo_in_place_of_the_launchers_pid_file_never_hangs_status(tmp_path: Path) -> None:
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    info = state / "profiles" / "svc" / "launcher.json"
    info.parent.mkdir(parents=True)
    os.mkfifo(info)
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state),
            "status", "--profile", "svc"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 3 and done.stdout.startswith("nothing has run yet"), done.stdout + done.stderr
