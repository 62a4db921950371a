"""How production runs now, recorded so that it can be restarted the same way — even by another process.

A `launch --profile NAME` launcher serves the profile when `launcher.json` names a live pid
(supervisor/control.py). It runs under systemd when its own cgroup is the unit
`vllm-gate@NAME.service` (the template of launcher/host/unit.py); `INVOCATION_ID` alone is not
enough, since every child of any service inherits it. Otherwise it was started by hand: its
command line, working directory and environment are kept to start it again detached.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import psutil

from launcher.host.unit import UNIT_NAME
from launcher.state.store import StateStore
from launcher.supervisor.control import running_launcher_pid
from launcher.supervisor.status import read_status


class Mode(StrEnum):
    SYSTEMD = "systemd"  # restart with `systemctl start UNIT`
    DETACHED = "detached"  # restart the recorded command line in a new session
    NONE = "none"  # nothing served the profile: leave it stopped afterwards


@dataclass(frozen=True, slots=True)
class Production:
    profile: str
    mode: Mode
    launcher_pid: int | None = None
    unit: str | None = None
    user_unit: bool = False  # `systemctl --user`
    argv: tuple[str, ...] = ()
    cwd: str | None = None
    env: dict[str, str] | None = field(default=None, repr=False)  # None: not readable; use ours
    engine_pid: int | None = None
    fingerprint: str | None = None
    phase: str | None = None
    uptime_s: float | None = None

    @property
    def running(self) -> bool:
        return self.mode is not Mode.NONE

    def describe(self) -> str:
        if self.mode is Mode.NONE:
            return "no launcher serves it"
        how = f"systemd unit {self.unit}" if self.mode is Mode.SYSTEMD else "started by hand, detached"
        return f"launcher pid {self.launcher_pid} ({how}), phase {self.phase}, fingerprint {self.fingerprint}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Production:
        env = data.get("env")
        return cls(
            profile=str(data["profile"]),
            mode=Mode(str(data.get("mode", "none"))),
            launcher_pid=data.get("launcher_pid"),
            unit=data.get("unit"),
            user_unit=bool(data.get("user_unit")),
            argv=tuple(str(a) for a in data.get("argv") or ()),
            cwd=data.get("cwd"),
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
            engine_pid=data.get("engine_pid"),
            fingerprint=data.get("fingerprint"),
            phase=data.get("phase"),
            uptime_s=data.get("uptime_s"),
        )


def unit_instance(profile: str) -> str:
    """`vllm-gate@prod.service` for profile `prod`."""
    return UNIT_NAME.replace("@.", f"@{profile}.")


def unit_from_cgroup(cgroup_text: str, profile: str) -> tuple[str, bool] | None:
    """(unit, user unit?) when the process's own cgroup is this profile's vllm-gate unit."""
    wanted = unit_instance(profile)
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1]
        parts = [p for p in path.split("/") if p]
        if parts and parts[-1] == wanted:
            return wanted, any(p.startswith("user@") for p in parts)
    return None


def discover(state_dir: Path, profile: str) -> Production:
    """What serves `profile` now, read from the state dir and /proc; starts and signals nothing."""
    pid = running_launcher_pid(state_dir, profile)
    if pid is None:
        return Production(profile, Mode.NONE)
    status = read_status(StateStore(state_dir).status_path(profile)) or {}
    try:
        process = psutil.Process(pid)
        argv = tuple(process.cmdline())
        cwd = _quiet(process.cwd)
        env = _quiet(process.environ)
        uptime = max(0.0, time.time() - process.create_time())
    except psutil.NoSuchProcess:
        return Production(profile, Mode.NONE)
    unit = unit_from_cgroup(_read(Path(f"/proc/{pid}/cgroup")), profile)
    mode = Mode.SYSTEMD if unit is not None and (env is None or "INVOCATION_ID" in env) else Mode.DETACHED
    return Production(
        profile=profile,
        mode=mode,
        launcher_pid=pid,
        unit=unit[0] if unit and mode is Mode.SYSTEMD else None,
        user_unit=bool(unit and unit[1]),
        argv=argv,
        cwd=cwd,
        env=dict(env) if env is not None and mode is Mode.DETACHED else None,
        engine_pid=_int(status.get("engine_pid")),
        fingerprint=status.get("serving_fingerprint"),
        phase=status.get("phase"),
        uptime_s=uptime,
    )


def _quiet(read: Any) -> Any:
    try:
        return read()
    except psutil.Error:
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
