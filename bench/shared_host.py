"""Benchmarks on a shared host: another user's vLLM orphan makes preflight refuse a start (exit 4),
rightly. A benchmark then waits and starts again instead of failing the whole series."""

from __future__ import annotations

import time
from typing import Any

from tests.launcher_run import Launcher

PREFLIGHT_REFUSED = 4


def start_serving(launcher: Launcher, timeout_s: float = 300.0, tries: int = 300) -> dict[str, Any]:
    """Start `launch` and wait until it serves; a preflight refusal is retried every 2 s."""
    for _ in range(tries):
        launcher.start()
        try:
            return launcher.wait_phase("serving", timeout_s)
        except AssertionError:
            if launcher.proc is None or launcher.proc.poll() != PREFLIGHT_REFUSED:
                raise
        time.sleep(2)
    raise RuntimeError(f"preflight refused {tries} times: foreign vLLM orphans on this host?")
