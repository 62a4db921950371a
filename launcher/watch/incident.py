"""The evidence kept before a wedged, failing or starving engine is stopped, like a bug report.

Once the engine is killed, what it was doing is gone: so first each titled process's state, its
`wchan` (the kernel function it sleeps in) and `/proc/PID/stack` where readable (root only), the
checks that failed with their times, and the last lines of vLLM's log go to one text file under
`STATE/profiles/NAME/incidents/`. Writing it never stops the action: a full disk is reported.
Reads are bounded (the log's tail from its last MiB, each /proc file to 64 KiB).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic
from launcher.watch import probes
from launcher.watch.verdict import Judgement, Observation

LOG_LINES = 200
TAIL_BYTES = 1 << 20
PROC_BYTES = 64 << 10
KEEP = 20


def stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def write_incident(
    directory: Path,
    *,
    profile: str,
    label: str,
    judgement: Judgement,
    action: str,
    pids: Sequence[int],
    prefixes: Sequence[str],
    observations: Sequence[tuple[float, Observation]],
    engine_log: Path,
    now: float,
) -> Path:
    """The bundle's path; OSError when it cannot be written (the caller says so and goes on).
    `now`: the epoch seconds it is written at (the watch's clock)."""
    name = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%S%fZ") + f"-{judgement.verdict}.txt"
    parts = [
        f"vllm-gate incident: {judgement.verdict} — profile {profile} — {stamp(now)}",
        f"serving: {label}",
        f"verdict: {judgement.verdict} by {judgement.check}: {judgement.detail}",
        f"process: {judgement.process or 'no process seen in a bad state'}",
        f"action: {action}",
        "",
        "== checks that failed, oldest first (time, check, kind, detail; a repeat once, with its count)",
        *_failed(observations),
        "",
        "== processes",
        *_processes(pids, prefixes),
        "",
        f"== the last {LOG_LINES} lines of {engine_log}",
        *_tail(engine_log),
    ]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    write_atomic(path, "\n".join(parts) + "\n")
    _prune(directory)
    return path


def _failed(observations: Sequence[tuple[float, Observation]]) -> list[str]:
    """One line per run of the same failed observation: a stopped process is seen every second."""
    runs: list[list[Any]] = []  # [first epoch, last epoch, count, observation]
    for at, obs in observations:
        if obs.ok:
            continue
        if runs and (runs[-1][3].check, runs[-1][3].kind, runs[-1][3].detail) == (
            obs.check,
            obs.kind,
            obs.detail,
        ):
            runs[-1][1], runs[-1][2] = at, runs[-1][2] + 1
        else:
            runs.append([at, at, 1, obs])
    lines = []
    for first, last, count, obs in runs:
        repeat = f" (x{count}, until {stamp(last)})" if count > 1 else ""
        lines.append(f"{stamp(first)}  {obs.check:<11} {obs.kind:<11} {obs.detail}{repeat}")
    return lines


def _processes(pids: Sequence[int], prefixes: Sequence[str]) -> list[str]:
    lines: list[str] = []
    for pid in pids:
        state = probes.process_state(pid) or "gone"
        lines.append(
            f"{probes.process_name(pid, prefixes)}: state {state}, wchan {_proc(pid, 'wchan') or '?'}"
        )
        stack = _proc(pid, "stack")
        lines += (
            [f"    {line}" for line in stack.splitlines()] if stack else ["    /proc/PID/stack not readable"]
        )
    return lines or ["(no process left in the engine's group)"]


def _proc(pid: int, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as handle:
            return handle.read(PROC_BYTES).decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def _tail(path: Path) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read(TAIL_BYTES)
    except OSError as err:
        return [f"(not readable: {err.strerror or err})"]
    lines = data.decode("utf-8", "replace").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first may be cut
    return lines[-LOG_LINES:]


def _prune(directory: Path) -> None:
    bundles = sorted(p for p in directory.glob("*.txt") if p.is_file() and not p.is_symlink())
    for old in bundles[:-KEEP]:
        old.unlink(missing_ok=True)
