"""Who is still in a process group or under a process: the one reading used by the engine stop,
the probe's leftover search and the tests' cleanup (killpg reaches a group; this checks it is
empty), and the one process-tree walk (the engine's memory, the processes a stop must see go)."""

from __future__ import annotations

import os

import psutil

PID_REUSE_SLACK_S = 1.0


def group_members(pgid: int, *, created_after: float | None = None) -> list[int]:
    """Live (non-zombie) processes of group `pgid`; with `created_after`, only those started
    after it (a reused group id belongs to something older: not ours)."""
    found = []
    for pid in psutil.pids():  # getpgid is one syscall; /proc/PID/stat is read for members only
        try:
            if os.getpgid(pid) != pgid:
                continue
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            created = proc.create_time()
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
        if created_after is not None and created < created_after - PID_REUSE_SLACK_S:
            continue
        found.append(pid)
    return found


def process_tree(pid: int) -> list[int]:
    """`pid` and every process under it, parents first; empty when `pid` is gone (or hidden from us)."""
    try:
        root = psutil.Process(pid)
        return [root.pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return []
