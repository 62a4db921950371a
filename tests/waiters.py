"""Real child processes that wait to be signalled — `polite` (SIGTERM ends it) or `deaf` (SIGTERM
ignored) — for the tests of whatever stops processes: the reaper, the probe's handover."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.simserver import HANG_S

# Says it is ready once its SIGTERM disposition is set, then waits to be signalled.
WAITER = """
import signal, sys, time
if sys.argv[1] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(3600)
"""


@contextmanager
def waiters() -> Iterator[list[subprocess.Popen[str]]]:
    """The waiters a test starts; each one still running at the end is killed (ours: by pid)."""
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.wait(HANG_S)
            if proc.stdout is not None:
                proc.stdout.close()


def start_waiter(started: list[subprocess.Popen[str]], kind: str = "polite") -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", WAITER, kind], stdout=subprocess.PIPE, text=True)
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc
