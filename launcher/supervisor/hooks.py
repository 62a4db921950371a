"""The seams the supervisor offers the host-safety layer (wired in `wiring.py`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from launcher.supervisor.candidate import Candidate
from launcher.supervisor.notify_port import Notifier, NullNotifier

GpuLocksFn = Callable[[Candidate], AbstractContextManager[object]]  # held for the engine's whole life


class PreflightFn(Protocol):
    """Raises PreflightRefused (exit 4). `serving`: the engine a reload stops only once this passed."""

    def __call__(self, candidate: Candidate, *, serving: frozenset[int] = ...) -> None: ...


class Guard(Protocol):
    """The restart-loop guard (launcher/host/restart_guard.py) as the supervisor uses it."""

    def should_retry(self, fingerprint: str) -> bool: ...

    def record_failure(self, fingerprint: str, reason: str) -> Any: ...

    def record_success(self, fingerprint: str) -> None: ...

    def status(self, fingerprint: str) -> Any: ...


@dataclass
class Hooks:
    """Seams the host-safety layer plugs into (preflight, GPU locks, restart guard, NVML, sd_notify)."""

    preflight: PreflightFn | None = None
    notifier: Notifier = field(default_factory=NullNotifier)
    gpu_bytes: Callable[[Any], int | None] | None = None
    gpu_locks: GpuLocksFn | None = None
    restart_guard: Callable[[Candidate], Guard] | None = None
