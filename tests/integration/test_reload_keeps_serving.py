"""Reloads never leave the box with nothing serving when something could serve, and a reload that
changes nothing restarts nothing: the real `launch` against `vllm-sim`, driven by SIGHUP and by
`launch rollback` (which asks by request id and prints its own verdict)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess

import pytest

from tests.launcher_run import LAUNCH, Launcher, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration


def rollback(launcher: Launcher, tag: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "rollback", tag, "--profile", launcher.profile, "--timeout-s", "60"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)


def events(launcher: Launcher) -> list[str]:
    return [r["event"] for r in launcher.history() if r["event"] != "engine_stopped"]


def test_sighup_with_an_unchanged_profile_keeps_the_engine(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    serving = launcher.wait_phase("serving")
    launcher.signal(signal.SIGHUP)
    after = launcher.wait_for(lambda s: s.get("reload_seq") == 1)
    assert after["engine_pid"] == serving["engine_pid"] and after["phase"] == "serving"
    assert after["detail"] == f"already serving {serving['serving_fingerprint']}"
    assert events(launcher)[-1] == "reload_noop" and "reload" not in events(launcher)
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_rollback_to_the_configuration_already_serving_restarts_nothing(
    launcher_factory: LauncherFactory,
) -> None:
    launcher = launcher_factory()
    path = write_profile(launcher.profiles, "svc", free_port())
    shutil.copy(path, path.with_name("svc.toml.bak_same"))
    launcher.start()
    serving = launcher.wait_phase("serving")
    result = rollback(launcher, "same")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"already serving {serving['serving_fingerprint']}" in result.stdout
    assert launcher.status()["engine_pid"] == serving["engine_pid"]
    assert launcher.engine_pids() == [serving["engine_pid"]]  # one start in all
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_a_candidate_preflight_refuses_keeps_the_running_engine_and_exits_4(
    launcher_factory: LauncherFactory,
) -> None:
    launcher = launcher_factory()
    port = free_port()
    path = write_profile(launcher.profiles, "svc", port)
    with socket.socket() as taken:  # another program listens on the port the candidate wants
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        moved = path.with_name("svc.toml.bak_moved")
        moved.write_text(path.read_text().replace(f"port = {port}", f"port = {busy}"))
        launcher.start()
        serving = launcher.wait_phase("serving")
        result = rollback(launcher, "moved")
        assert result.returncode == 4, result.stdout + result.stderr
        assert "refused before anything was stopped" in result.stdout
        assert f"port: 127.0.0.1:{busy} is in use" in result.stdout
    status = launcher.status()
    assert status["phase"] == "serving" and status["engine_pid"] == serving["engine_pid"]
    assert status["detail"].startswith("reload refused: preflight refused")
    assert events(launcher)[-1] == "reload_refused" and "reload" not in events(launcher)
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
