"""A launcher SIGKILLed while its sleeper hangs in a wake (issue 42): the kernel's parent-death signal
reaches the sleeper, but its shutdown waits for an engine that never answers, so for seconds it
still holds `engine.port`. A start in that window used to be refused (exit 4: "final for the unit",
RestartPreventExitStatus=4). The next start now ends this deployment's own orphans — the deployment
mark says whose they are — and serves. Real processes: the real `launch`, the simulator whose
`/wake_up` never answers (`--sim-wake-fault hang`)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

import psutil
import pytest

from tests.integration.test_park import events, serve_parked
from tests.launcher_run import LAUNCH, LauncherFactory
from tests.simserver import HANG_S

pytestmark = pytest.mark.integration


def wait_until(happened: Callable[[], bool]) -> None:
    """Wait on an event; the deadline only ends a hang (HANG_S), it judges no speed."""
    deadline = time.monotonic() + HANG_S
    while not happened():
        if time.monotonic() >= deadline:
            raise AssertionError(f"still not so after {HANG_S} s: a hang")
        time.sleep(0.05)


def test_a_start_right_after_a_launcher_killed_mid_wake_ends_its_orphans_and_serves(
    launcher_factory: LauncherFactory,
) -> None:
    launcher, port, _, serving = serve_parked(
        launcher_factory, sim_wake_fault="hang", supervisor={"wake_timeout_s": 120}
    )
    where = ["--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state)]
    argv = [str(LAUNCH), *where, "set", "svc", "sim_tool_fault=malformed", "--tag", "bad", "--apply"]
    setter = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = launcher.state / "profiles" / "svc" / "logs" / "engine.log"
        wait_until(lambda: "rejected" in events(launcher) and "wake up the engine" in log.read_text())
        launcher.signal(signal.SIGKILL)  # mid-wake: the sleeper's /wake_up never answers
        assert launcher.wait_exit() == -signal.SIGKILL
    finally:
        setter.wait(timeout=60)
    sleeper = psutil.Process(serving["engine_pid"])
    assert sleeper.is_running() and sleeper.status() != psutil.STATUS_ZOMBIE  # still there, holding the port
    again = launcher_factory().start()
    assert again.proc is not None
    pid = again.proc.pid
    now = again.wait_for(lambda s: s.get("launcher_pid") == pid and s.get("phase") == "serving_last_good")
    assert not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE  # ended by the start
    assert now["engine_pid"] != serving["engine_pid"]
    output = again.output()
    assert "ended this deployment's orphans, left by a launcher that died" in output
    assert f"pid {serving['engine_pid']} " in output
    again.signal(signal.SIGTERM)
    assert again.wait_exit() == 3  # stopped while serving last-good (the change stays rejected)
