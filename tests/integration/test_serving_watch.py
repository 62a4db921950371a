"""The serving watch with real processes: the real `launch` serving the real simulator, whose
processes are stopped with real signals after promotion. A stopped process answers nothing while
its socket still accepts, exactly what a hung server does to its clients."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import psutil
import pytest

from tests.launcher_run import LAUNCH, free_port, write_profile

pytestmark = pytest.mark.integration

# A canary every second with a 1 s deadline: a hang is called within seconds, not minutes.
FAST_WATCH = {"canary_interval_s": 1, "canary_timeout_s": 1, "wedge_after": 2}


def events(launcher: Any) -> list[str]:
    return [str(r["event"]) for r in launcher.history()]


def record(launcher: Any, event: str) -> dict[str, Any]:
    return next(r for r in launcher.history() if r["event"] == event)


def wait_event(launcher: Any, event: str, timeout_s: float = 60.0) -> dict[str, Any]:
    launcher.wait_for(lambda _: event in events(launcher), timeout_s)
    return record(launcher, event)


def launch(*args: str, launcher: Any) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def api_server_of(status: dict[str, Any]) -> int:
    return int(status["engine_pid"])


def test_a_stopped_api_server_is_called_wedged_named_kept_as_evidence_and_restarted(launcher_factory: Any) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor=FAST_WATCH)
    launcher.start()
    serving = launcher.wait_phase("serving")
    stopped = api_server_of(serving)
    os.kill(stopped, signal.SIGSTOP)
    wedged = wait_event(launcher, "wedged")
    assert wedged["verdict"] == "wedged" and wedged["action"] == "restart"
    assert wedged["check"] in ("canary", "health") and "no answer within 1 s" in wedged["detail"]
    assert wedged["process"] == f"API server pid {stopped} is stopped (state T)"
    incident = open(wedged["incident"]).read()
    assert f"API server pid {stopped}: state stopped" in incident  # each process, its state, its wchan
    assert "== the last 200 lines of" in incident and "Application startup complete." in incident
    recovered = wait_event(launcher, "recovered")
    assert recovered["how"] == "restart"
    again = launcher.wait_for(lambda s: s.get("phase") == "serving" and s.get("engine_pid") != stopped)
    assert not psutil.pid_exists(stopped) or psutil.Process(stopped).status() == psutil.STATUS_ZOMBIE
    assert again["watch"]["verdict"] == "serving"
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_with_on_wedge_log_the_status_says_wedged_exits_3_and_clears_when_it_answers_again(
    launcher_factory: Any,
) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor={**FAST_WATCH, "on_wedge": "log"})
    launcher.start()
    stopped = api_server_of(launcher.wait_phase("serving"))
    os.kill(stopped, signal.SIGSTOP)
    try:
        wait_event(launcher, "wedged")
        shown = launch("status", "--profile", "svc", launcher=launcher)
        assert shown.returncode == 3, shown.stdout + shown.stderr
        assert "watch: wedged by" in shown.stdout and f"API server pid {stopped} is stopped" in shown.stdout
    finally:
        os.kill(stopped, signal.SIGCONT)
    launcher.wait_for(lambda s: (s.get("watch") or {}).get("verdict") == "serving", 60.0)
    assert launch("status", "--profile", "svc", launcher=launcher).returncode == 0
    assert launcher.status()["engine_pid"] == stopped  # logged, never restarted
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_check_live_is_a_liveness_probe_that_a_hung_server_fails(launcher_factory: Any) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor={"watch": False})
    launcher.start()
    stopped = api_server_of(launcher.wait_phase("serving"))
    live = launch("check", "--profile", "svc", "--live", "--timeout-s", "2", launcher=launcher)
    assert live.returncode == 0, live.stdout + live.stderr
    assert "PASS  health" in live.stdout and "PASS  canary" in live.stdout
    os.kill(stopped, signal.SIGSTOP)
    try:
        hung = launch("check", "--profile", "svc", "--live", "--timeout-s", "1", launcher=launcher)
    finally:
        os.kill(stopped, signal.SIGCONT)
    assert hung.returncode == 1 and "FAIL" in hung.stdout
    both = launch("check", "--profile", "svc", "--live", "--gates", "health", launcher=launcher)
    assert both.returncode == 2 and "--live" in both.stderr
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
