"""`systemctl reload` with a bad hand edit (issue 42): the unit's `ExecReload=launch reload --profile
%i` exits with the reload's verdict, so systemd fails the reload job, where `kill -HUP` returned 0 at
once. With real processes: the real `launch` serving the simulator, its stderr playing the journal
(JOURNAL_STREAM), and the real `launch reload` that systemd would run."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration


def reload(launcher: Launcher, profile: str = "svc") -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "reload", "--profile", profile]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def metric(launcher: Launcher, name: str) -> str:
    text = (launcher.state / "metrics" / "vllm_gate_svc.prom").read_text()
    return next(line for line in text.splitlines() if line.startswith(f'{name}{{profile="svc"}}'))


def test_a_bad_hand_edit_fails_the_reload_with_its_reason_and_what_serves_serves_on(
    launcher_factory: LauncherFactory,
) -> None:
    launcher = launcher_factory()
    profile = write_profile(launcher.profiles, "svc", free_port())
    launcher.start(journal=True)
    serving = launcher.wait_phase("serving")
    good = profile.read_text()
    profile.write_text(good.replace("max_num_seqs = 4", 'max_num_seqs = "four"'))  # the hand edit
    done = reload(launcher)
    assert done.returncode == 2, done.stdout + done.stderr  # systemctl reload fails: the job's result
    assert "refused: the profile does not render; the running engine keeps serving" in done.stdout
    assert "max_num_seqs" in done.stdout  # why, in the profile's own words
    status = launcher.status()
    assert status["phase"] == "serving" and status["engine_pid"] == serving["engine_pid"]
    assert status["reload_refused"] == 1 and "max_num_seqs" in status["last_reload_refusal"]["reason"]
    assert (
        metric(launcher, "vllm_gate_reloads_refused_total")
        == 'vllm_gate_reloads_refused_total{profile="svc"} 1.0'
    )
    profile.write_text(good.replace("max_num_seqs = 4", "max_num_seqs = 2"))  # fixed
    fixed = reload(launcher)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "reloaded: the launcher serves the profile as it is now" in fixed.stdout
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    journal = launcher.output().splitlines()
    refused = [line for line in journal if line.startswith("<4>launcher.reload_refused ")]
    assert len(refused) == 1 and "max_num_seqs" in refused[0] and "still serving" in refused[0], journal
    requested = [line for line in journal if line.startswith("<6>launcher.reload ")]
    assert len(requested) == 2 and all("requests=none" not in line for line in requested)  # each its own


def test_reload_without_a_running_launcher_is_bad_input_and_signals_nothing(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    write_profile(profiles, "svc", free_port())
    launcher = Launcher(profiles, tmp_path / "state", "svc")
    done = reload(launcher)
    assert done.returncode == 2 and "no launcher is running profile 'svc'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "state").exists()
    bad = reload(launcher, "../etc")
    assert bad.returncode == 2 and "invalid profile name" in bad.stderr
