"""Real processes for host-safety tests: titled like vLLM's, orphaned, deaf to SIGTERM, on a port.

Every process is registered with a `Spawner` and killed in its `close()` (a fixture's finally), so
no test leaves one behind. Readiness is a line on a pipe, read against a deadline: no sleeps.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from launcher.host.orphans import INIT_NAMES

# Sets its title, optionally ignores SIGTERM / listens / holds GPU locks / holds CUDA memory (torch),
# says "ready PID", waits.
# It exits by itself after 120 s, so even a killed test run leaves nothing for long.
CHILD = r"""
import os, signal, socket, sys, time
title, ignore_term, port, locks, gpu_mib = os.environ.pop("TITLED_CHILD").split("#")
ignore_term, port, gpu_mib = ignore_term == "1", int(port), int(gpu_mib)
if title:
    import setproctitle
    setproctitle.setproctitle(title)
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
held = None
if port:
    held = socket.socket()
    held.bind(("127.0.0.1", port))
    held.listen()
if locks:
    from pathlib import Path
    from launcher.host.gpu_locks import GpuLocks
    state, profile, gpus = locks.split("|")
    held = GpuLocks(Path(state), gpus.split(","), profile)
    held.acquire()
if gpu_mib:
    import torch
    block = torch.empty(gpu_mib << 20, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
print("ready", os.getpid(), flush=True)
time.sleep(120)
"""

# Starts CHILD (which inherits our stdout) and exits at once: the child is orphaned.
ORPHANER = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print("child", child.pid, flush=True)
"""

READY_TIMEOUT_S = 10.0


class Spawner:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.children: list[subprocess.Popen[str]] = []
        self.orphans: list[psutil.Process] = []

    def child(
        self,
        title: str = "",
        *,
        ignore_term: bool = False,
        port: int = 0,
        locks: str = "",
        script: str | None = None,
    ) -> subprocess.Popen[str]:
        """A direct child; with `script`, run as `python SCRIPT` in `cwd` (command line `python train.py`)."""
        argv = [sys.executable, "-c", CHILD] if script is None else [sys.executable, script]
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, text=True, cwd=self.cwd, env=_env(title, ignore_term, port, locks)
        )
        self.children.append(proc)
        assert proc.stdout is not None
        line = _read_line(proc.stdout.fileno(), READY_TIMEOUT_S)
        assert line.startswith("ready"), f"child said {line!r}"
        return proc

    def orphan(
        self, title: str, *, ignore_term: bool = False, gpu_mib: int = 0, env: dict[str, str] | None = None
    ) -> psutil.Process:
        """A titled process whose parent has exited (reparented to init); `env` adds to its environment
        (a deployment mark, say)."""
        starter = subprocess.Popen(
            [sys.executable, "-c", ORPHANER, CHILD],
            stdout=subprocess.PIPE,
            text=True,
            env={**_env(title, ignore_term, 0, "", gpu_mib), **(env or {})},
        )
        self.children.append(starter)
        assert starter.stdout is not None
        timeout_s = READY_TIMEOUT_S * (6 if gpu_mib else 1)  # importing torch and starting CUDA is slow
        ready = False
        orphan: psutil.Process | None = None
        while orphan is None or not ready:
            line = _read_line(starter.stdout.fileno(), timeout_s)
            if line.startswith("child"):
                orphan = psutil.Process(int(line.split()[1]))
                self.orphans.append(orphan)  # registered at once: cleaned up even if it never gets ready
            ready = ready or line.startswith("ready")
            assert line, "the orphan died before it was ready"
        starter.wait(timeout=READY_TIMEOUT_S)
        parent = orphan.parent()
        if parent is not None and parent.pid != 1 and parent.name() not in INIT_NAMES:
            pytest.skip(
                f"orphans are reparented to subreaper pid {parent.pid} ({parent.name()}) here, not to init"
            )
        return orphan

    def close(self) -> None:
        for orphan in self.orphans:
            with contextlib.suppress(psutil.Error):
                orphan.kill()
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=READY_TIMEOUT_S)
            if proc.stdout is not None:
                proc.stdout.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while (left := [p.pid for p in self.orphans if alive(p.pid)]) and time.monotonic() < deadline:
            time.sleep(0.01)  # orphans are init's children: nothing of ours to wait on
        assert not left, f"left behind: {left}"


def _env(title: str, ignore_term: bool, port: int, locks: str, gpu_mib: int = 0) -> dict[str, str]:
    spec = "#".join((title, "1" if ignore_term else "0", str(port), locks, str(gpu_mib)))
    path = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")])
    )
    return {**os.environ, "TITLED_CHILD": spec, "PYTHONPATH": path}


def _read_line(fd: int, timeout_s: float) -> str:
    """One line from a pipe, waiting at most `timeout_s` (raw reads: no buffered data is lost)."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, remaining))
        if not ready:
            raise TimeoutError(f"no line within {timeout_s} s (got {data!r})")
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def alive(pid: int) -> bool:
    try:
        zombie: bool = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    return not zombie
