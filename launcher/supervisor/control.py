"""Talk to a running launcher from another process: find it, ask it to reload, wait for the verdict.

A launcher publishes two files in STATE/profiles/NAME/ (launcher/supervisor/lock.py, status.py):
`launcher.json` {pid, started_at} while it holds the profile lock, and `status.json` (phase,
reload_seq, detail, …). A reload request (`reload_requests`) plus SIGHUP asks it to reload the
profile; it answers that request, by id, once the reload has ended.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from basis.clock import SYSTEM_CLOCK, Clock, epoch_of
from launcher.errors import GateFailed
from launcher.state.store import StateStore
from launcher.supervisor import reload_requests
from launcher.supervisor.history import History
from launcher.supervisor.reload_requests import Verdict
from launcher.supervisor.status import read_status

POLL_S = 0.1
PID_REUSE_SLACK_S = 5.0  # started_at is written just after the process starts, never long before


def running_launcher_pid(state_dir: Path, profile: str) -> int | None:
    """The pid in `launcher.json` when that process is alive and is the one that wrote it."""
    try:
        info = json.loads(StateStore(state_dir).launcher_info_path(profile).read_text(encoding="utf-8"))
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
    clock: Clock = SYSTEM_CLOCK,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> Verdict:
    """Ask the profile's launcher to reload (a request with its own id, then SIGHUP) and wait for
    that request's verdict, an outcome with its exit code: promoted or unchanged 0, rolled_back 3,
    refused 4 and invalid 2 (the engine kept), failed 1 (or the code of the error the launcher left on).
    GateFailed when no verdict comes, with what the state dir says of why. `on_status` sees each
    status read while waiting, `on_progress` each progress line the launcher wrote for this
    request (what `launch try` shows; a wait may last 30 minutes)."""
    return _ask_and_wait(
        state_dir,
        profile,
        reload_requests.request,
        timeout_s,
        "reload",
        clock=clock,
        on_status=on_status,
        on_progress=on_progress,
    )


def control_and_wait(
    state_dir: Path, profile: str, action: reload_requests.Action, timeout_s: float
) -> Verdict:
    """Ask the running launcher to park or wake its engine (`launch probe`), and wait for its verdict."""

    def ask(reloads: Path) -> str:
        return reload_requests.ask(reloads, action, os.getpid())

    return _ask_and_wait(state_dir, profile, ask, timeout_s, str(action))


def _ask_and_wait(
    state_dir: Path,
    profile: str,
    make_request: Callable[[Path], str],
    timeout_s: float,
    what: str,
    *,
    clock: Clock = SYSTEM_CLOCK,
    on_status: Callable[[dict[str, Any]], None] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> Verdict:
    """Make the request, SIGHUP the profile's launcher, and poll until that request's verdict."""
    pid = running_launcher_pid(state_dir, profile)
    if pid is None:
        raise GateFailed(
            f"no launcher is running profile {profile!r}", hint="start it with `launch --profile NAME`"
        )
    store = StateStore(state_dir)
    reloads = store.reloads_dir(profile)
    rid = make_request(reloads)
    os.kill(pid, signal.SIGHUP)
    deadline = clock.monotonic() + timeout_s
    with reload_requests.ProgressTail(reloads, rid, on_progress) as tail:
        while True:
            _show_status(store, profile, on_status)
            tail.read()
            found = _verdict_unless_gone(state_dir, profile, pid, rid, what)
            if found is not None:
                return found
            if clock.monotonic() >= deadline:
                phase = (read_status(store.status_path(profile)) or {}).get("phase")
                who = f"launcher pid {pid} of {profile!r}"
                raise GateFailed(
                    f"{who} gave no verdict within {timeout_s:g} s (phase: {phase})",
                    hint="the launcher carries on; follow it with `launch status`",
                )
            clock.sleep(POLL_S)


def _show_status(store: StateStore, profile: str, on_status: Callable[[dict[str, Any]], None] | None) -> None:
    if on_status is None:
        return
    status = read_status(store.status_path(profile))
    if status is not None:
        on_status(status)


def _verdict_unless_gone(state_dir: Path, profile: str, pid: int, rid: str, what: str) -> Verdict | None:
    """The request's verdict once written, else None while launcher `pid` runs; GateFailed once it
    exited without one."""
    reloads = StateStore(state_dir).reloads_dir(profile)
    found = reload_requests.verdict(reloads, rid)
    if found is not None or running_launcher_pid(state_dir, profile) == pid:
        return found
    found = reload_requests.verdict(reloads, rid)  # written just before it exited
    if found is not None:
        return found
    raise GateFailed(
        f"launcher pid {pid} of {profile!r} exited during the {what} ({last_words(state_dir, profile)})",
        hint="`launch history --profile NAME` has the full record",
    )


def last_words(state_dir: Path, profile: str) -> str:
    """Why a launcher ended, from what it left: its status, else its last history record."""
    status = read_status(StateStore(state_dir).status_path(profile)) or {}
    why = status.get("rollback_reason") or status.get("detail")
    phase = status.get("phase")
    if not why:
        records = History(StateStore(state_dir).history_path).read(profile=profile, limit=1)
        why = records[-1].get("reason") or records[-1].get("how") if records else None
    return f"last phase {phase}: {why}" if why else f"last phase {phase}; it recorded no cause"


def _epoch(value: Any) -> float | None:
    """`started_at` as the lock writes it (`2026-09-17T10:15:00.123456Z`), or epoch seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return epoch_of(value)
