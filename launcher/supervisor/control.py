"""Talk to a running launcher from another process: find it, ask it to reload, wait for the verdict.

A launcher publishes two files in STATE/profiles/NAME/ (launcher/supervisor/lock.py, status.py):
`launcher.json` {pid, started_at} while it holds the profile lock, and `status.json` (phase,
reload_seq, detail, …). SIGHUP asks it to reload the profile; it bumps `reload_seq` once the reload
has ended: serving the candidate, serving last-good again, or failed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from launcher.errors import ExitCode, GateFailed
from launcher.supervisor.status import Phase, read_status

POLL_S = 0.1
PID_REUSE_SLACK_S = 5.0  # started_at is written just after the process starts, never long before
VERDICTS = {
    Phase.SERVING: ExitCode.OK,
    Phase.SERVING_LAST_GOOD: ExitCode.ROLLED_BACK,
    Phase.FAILED: ExitCode.GATE_FAILED,
}
REFUSED_PREFIX = "reload refused"


def profile_state_dir(state_dir: Path, profile: str) -> Path:
    return state_dir / "profiles" / profile


def running_launcher_pid(state_dir: Path, profile: str) -> int | None:
    """The pid in `launcher.json` when that process is alive and is the one that wrote it."""
    try:
        info = json.loads(
            (profile_state_dir(state_dir, profile) / "launcher.json").read_text(encoding="utf-8")
        )
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        created = process.create_time()
    except psutil.Error:
        return None
    started = _epoch(info.get("started_at"))
    if started is not None and started < created - PID_REUSE_SLACK_S:
        return None  # the launcher died without cleaning up and its pid went to another process
    return pid


def reload_and_wait(
    state_dir: Path,
    profile: str,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_status: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """SIGHUP the profile's launcher and wait for its verdict: 0 serving the change, 3 serving
    last-good (the change was rejected or refused), 1 failed; GateFailed when no verdict comes.
    `on_status` sees each status read while waiting (progress for a wait of up to 30 minutes)."""
    pid = running_launcher_pid(state_dir, profile)
    if pid is None:
        raise GateFailed(
            f"no launcher is running profile {profile!r}", hint="start it with `launch --profile NAME`"
        )
    status_path = profile_state_dir(state_dir, profile) / "status.json"
    seq_before = _reload_seq(read_status(status_path))
    os.kill(pid, signal.SIGHUP)
    deadline = clock() + timeout_s
    while True:
        status = read_status(status_path)
        if on_status is not None and status is not None:
            on_status(status)
        verdict = _verdict(status, seq_before)
        if verdict is not None:
            return verdict
        if running_launcher_pid(state_dir, profile) != pid:
            phase = status.get("phase") if status else None
            raise GateFailed(
                f"launcher pid {pid} of {profile!r} exited during the reload (last phase: {phase})"
            )
        if clock() >= deadline:
            phase = status.get("phase") if status else None
            raise GateFailed(
                f"launcher pid {pid} of {profile!r} gave no verdict within {timeout_s:g} s (phase: {phase})",
                hint="the launcher carries on; follow it with `launch status`",
            )
        sleep(POLL_S)


def _verdict(status: dict[str, Any] | None, seq_before: int) -> int | None:
    if status is None or _reload_seq(status) <= seq_before:
        return None
    phase = status.get("phase")
    if phase not in VERDICTS:
        return None
    if str(status.get("detail") or "").startswith(REFUSED_PREFIX):
        return int(ExitCode.ROLLED_BACK)  # the launcher kept serving what it served before
    return int(VERDICTS[Phase(phase)])


def _reload_seq(status: dict[str, Any] | None) -> int:
    try:
        return int((status or {}).get("reload_seq", 0))
    except (TypeError, ValueError):
        return 0


def _epoch(value: Any) -> float | None:
    """`started_at` as the lock writes it (`2026-09-17T10:15:00.123456Z`), or epoch seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return parsed.timestamp()
