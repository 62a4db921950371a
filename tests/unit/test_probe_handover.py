"""Handing the box over (launcher/probe/handover.py): production is stopped the way it runs and started
again the same way, on real processes this test starts and a stand-in `systemctl` that records what
it was asked. Never two models at once: `stop` returns only once the launcher is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from basis.clock import SystemClock
from launcher.errors import GateFailed
from launcher.probe.handover import Handover, Serving, Systemctl
from launcher.probe.production import Mode, Production
from tests.simserver import HANG_S
from tests.waiters import start_waiter, waiters


@pytest.fixture
def launchers() -> Iterator[list[subprocess.Popen[str]]]:
    with waiters() as started:
        yield started


def launcher(started: list[subprocess.Popen[str]], kind: str = "polite") -> int:
    proc = start_waiter(started, kind)
    return proc.pid


def recording_systemctl(tmp_path: Path, exit_code: int = 0) -> tuple[Systemctl, Path]:
    """A `systemctl` that appends its arguments to a file and exits with `exit_code`."""
    calls = tmp_path / "systemctl.calls"
    program = tmp_path / "systemctl"
    program.write_text(
        f"#!{sys.executable}\nimport sys\nopen({str(calls)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"print('Failed to stop unit: Access denied', file=sys.stderr)\nsys.exit({exit_code})\n"
    )
    program.chmod(0o755)
    return Systemctl(program=str(program)), calls


def test_a_detached_launcher_gets_sigterm_and_stop_returns_once_it_is_gone(
    tmp_path: Path, launchers: list[subprocess.Popen[str]]
) -> None:
    pid = launcher(launchers)
    production = Production("prod", Mode.DETACHED, launcher_pid=pid)
    stopped = Handover(tmp_path, SystemClock()).stop(production, deadline=SystemClock().monotonic() + HANG_S)
    assert stopped.how == f"SIGTERM to launcher pid {pid}" and stopped.leftovers == ()
    assert launchers[0].poll() == -signal.SIGTERM, "gone (a zombie of ours) before stop returned"


def test_a_launcher_that_does_not_exit_in_time_is_killed(
    tmp_path: Path, launchers: list[subprocess.Popen[str]]
) -> None:
    pid = launcher(launchers, "deaf")
    clock = SystemClock()
    # the deadline's expiry is the outcome: load can only make it come later
    stopped = Handover(tmp_path, clock).stop(
        Production("prod", Mode.DETACHED, launcher_pid=pid), deadline=clock.monotonic() + 0.3
    )
    assert stopped.how == f"SIGTERM to launcher pid {pid}, then SIGKILL (it did not exit in time)"
    assert launchers[0].wait(HANG_S) == -signal.SIGKILL


def test_a_systemd_launcher_is_stopped_by_its_unit_as_the_user_it_runs_as(tmp_path: Path) -> None:
    systemctl, calls = recording_systemctl(tmp_path)
    handover = Handover(tmp_path, SystemClock(), systemctl)
    unit = Production("prod", Mode.SYSTEMD, unit="vllm-gate@prod.service", user_unit=True)
    stopped = handover.stop(unit, deadline=SystemClock().monotonic() + HANG_S)
    assert stopped.how == "systemctl stop vllm-gate@prod.service"
    assert handover.start(unit, log_path=tmp_path / "restore.log") is None
    system = Production("prod", Mode.SYSTEMD, unit="vllm-gate@prod.service")
    handover.stop(system, deadline=SystemClock().monotonic() + HANG_S)
    assert calls.read_text().splitlines() == [
        "--user stop vllm-gate@prod.service",
        "--user start --no-block vllm-gate@prod.service",
        "stop vllm-gate@prod.service",
    ]


def test_a_systemctl_that_fails_is_a_gate_failure_with_what_it_said(tmp_path: Path) -> None:
    systemctl, _ = recording_systemctl(tmp_path, exit_code=4)
    with pytest.raises(GateFailed, match="exited 4: Failed to stop unit: Access denied") as caught:
        systemctl(False, "stop", "vllm-gate@prod.service")
    assert caught.value.hint is not None and "journalctl -u" in caught.value.hint
    with pytest.raises(GateFailed, match="failed: "):
        Systemctl(program=str(tmp_path / "no-such-systemctl"))(False, "stop", "x")


def test_a_detached_production_starts_again_as_recorded_in_its_own_session(tmp_path: Path) -> None:
    script = "import os, sys; print(os.getcwd(), os.environ['PROBE_MARK'], os.getsid(0) == os.getpid(), "
    script += "*sys.argv[1:])"
    production = Production(
        "prod", Mode.DETACHED, argv=(sys.executable, "-c", script, "--profile", "prod"), cwd=str(tmp_path),
        env={**os.environ, "PROBE_MARK": "restored"},
    )  # fmt: skip
    handover = Handover(tmp_path, SystemClock())
    log = tmp_path / "logs" / "restore.log"
    pid = handover.start(production, log_path=log)
    [proc] = handover.started
    assert pid == proc.pid and proc.wait(HANG_S) == 0
    assert log.read_text() == f"{tmp_path} restored True --profile prod\n"


def test_nothing_is_started_where_nothing_ran(tmp_path: Path) -> None:
    handover = Handover(tmp_path, SystemClock())
    assert handover.start(Production("prod", Mode.NONE), log_path=tmp_path / "x.log") is None
    assert handover.started == [] and not (tmp_path / "x.log").exists()


def test_serving_is_ok_only_in_a_serving_phase() -> None:
    assert Serving("serving", 42, 3.0).ok and Serving("serving_last_good", 42, 3.0, "rejected by smoke").ok
    assert (
        not Serving("exited", None, 1.0).ok and not Serving("not serving (loading)", 42, 9.0, "deadline").ok
    )
