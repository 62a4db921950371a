"""Hand the box over: stop the production launcher the way it runs, start it again the same way, and
wait until it serves. Never two models at once: stopping returns only when the launcher is gone and
its engine's process group is empty."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from basis.clock import Clock
from launcher.errors import GateFailed
from launcher.probe.leftovers import end_processes
from launcher.probe.production import Mode, Production
from launcher.procgroup import group_members
from launcher.state.store import StateStore
from launcher.supervisor.control import POLL_S, running_launcher_pid
from launcher.supervisor.status import Phase, read_status

SERVING = (Phase.SERVING, Phase.SERVING_LAST_GOOD)
KILL_GRACE_S = 5.0


@dataclass(frozen=True, slots=True)
class Systemctl:
    """The one seam to systemd (tests pass a stand-in program that records what it was asked)."""

    program: str = "systemctl"
    timeout_s: float = 600.0

    def __call__(self, user: bool, *args: str) -> None:
        argv = [self.program, *(["--user"] if user else []), *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise GateFailed(f"`{' '.join(argv)}` failed: {err}") from err
        if done.returncode != 0:
            raise GateFailed(
                f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}",
                hint="see `systemctl status` and `journalctl -u` for the unit",
            )


@dataclass(frozen=True, slots=True)
class Stopped:
    seconds: float
    how: str
    leftovers: tuple[int, ...]  # engine processes that had to be ended after the launcher was gone


@dataclass(frozen=True, slots=True)
class Serving:
    phase: str
    launcher_pid: int | None
    seconds: float
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.phase in SERVING


@dataclass
class Handover:
    state_dir: Path
    clock: Clock
    systemctl: Systemctl = field(default_factory=Systemctl)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def stop(self, production: Production, *, deadline: float) -> Stopped:
        """Stop the launcher (systemctl stop, or SIGTERM) and wait until it and its engine are gone."""
        began = self.clock.monotonic()
        pid = production.launcher_pid
        if production.mode is Mode.SYSTEMD:
            assert production.unit is not None
            self.systemctl(production.user_unit, "stop", production.unit)
            how = f"systemctl stop {production.unit}"
        else:
            how = f"SIGTERM to launcher pid {pid}"
            if pid is not None:
                _signal(pid, signal.SIGTERM)
        if pid is not None and not self._gone(pid, deadline):
            _signal(pid, signal.SIGKILL)  # the launcher hung: its engine is ended below
            self._gone(pid, self.clock.monotonic() + KILL_GRACE_S)
            how += ", then SIGKILL (it did not exit in time)"
        left: list[int] = []
        if production.engine_pid is not None:
            left = group_members(production.engine_pid)
            end_processes(left, grace_s=KILL_GRACE_S, deadline_s=KILL_GRACE_S * 3, clock=self.clock)
        return Stopped(self.clock.monotonic() - began, how, tuple(left))

    def start(self, production: Production, *, log_path: Path) -> int | None:
        """Start production the way it ran; returns the launcher pid when started here."""
        if production.mode is Mode.SYSTEMD:
            assert production.unit is not None
            self.systemctl(production.user_unit, "start", "--no-block", production.unit)
            return None
        if production.mode is Mode.NONE:
            return None
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                list(production.argv),
                cwd=production.cwd or None,
                env=production.env if production.env is not None else dict(os.environ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # not in the probe's group: Ctrl-C or the probe's death leave it be
            )
        self.started.append(proc)
        return proc.pid

    def wait_serving(self, profile: str, *, not_pids: set[int], deadline: float) -> Serving:
        """Wait for a new launcher of `profile` to serve (or give up: failed, exited, deadline)."""
        began = self.clock.monotonic()
        status_path = StateStore(self.state_dir).status_path(profile)
        while True:
            pid = running_launcher_pid(self.state_dir, profile)
            status = read_status(status_path) or {}
            phase = str(status.get("phase") or "")
            ours = pid is not None and pid not in not_pids and status.get("launcher_pid") == pid
            if ours and phase in SERVING:
                return Serving(phase, pid, self.clock.monotonic() - began, status.get("rollback_reason"))
            if self._died(status, pid, not_pids):
                return Serving(phase or "exited", None, self.clock.monotonic() - began, status.get("detail"))
            if self.clock.monotonic() >= deadline:
                return Serving(
                    f"not serving ({phase or 'no status'})", pid, self.clock.monotonic() - began, "deadline"
                )
            self.clock.sleep(POLL_S)

    def _died(self, status: dict[str, object], pid: int | None, not_pids: set[int]) -> bool:
        """A launcher started here has exited, or a new one wrote `failed` and is gone."""
        if any(p.poll() is not None for p in self.started[-1:]):
            return pid is None
        writer = status.get("launcher_pid")
        return status.get("phase") == Phase.FAILED and writer not in not_pids and pid is None

    def _gone(self, pid: int, deadline: float) -> bool:
        while True:
            try:
                process = psutil.Process(pid)
                if process.status() == psutil.STATUS_ZOMBIE:
                    return True
            except psutil.NoSuchProcess:
                return True
            if self.clock.monotonic() >= deadline:
                return False
            self.clock.sleep(POLL_S)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
