"""The seams the supervisor offers the host-safety layer (wired in `wiring.py`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from launcher.supervisor.candidate import Candidate
from launcher.supervisor.notify_port import Notifier, NullNotifier
from launcher.watch.verdict import Judgement

if TYPE_CHECKING:
    from launcher.supervisor.engine_port import EngineHandle


class GpuLocksFn(Protocol):
    """The candidate's GPU locks, held for its engine's whole life. `sharing`: a parked engine of
    this launcher whose locks cover the same GPUs; the candidate then takes none of its own."""

    def __call__(
        self, candidate: Candidate, *, sharing: Candidate | None = None
    ) -> AbstractContextManager[object]: ...


class WatchHandle(Protocol):
    """The serving watch as the serve loop uses it (launcher/watch/runner.py `ServingWatch`)."""

    @property
    def judgement(self) -> Judgement: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def keep_evidence(
        self,
        directory: Path,
        *,
        profile: str,
        label: str,
        judgement: Judgement,
        action: str,
        engine_log: Path,
    ) -> Path: ...


# Makes the watch of what serves: the candidate, its engine, and where verdict changes go.
WatchFactory = Callable[[Candidate, "EngineHandle", Callable[[Judgement], None]], WatchHandle]


class PreflightFn(Protocol):
    """Raises PreflightRefused (exit 4). `serving`: the engine a reload stops only once this passed
    (what it holds counts as free); `parked`: an engine asleep on the same GPUs (its residue counts
    as used, but it is not a second model: it serves nothing)."""

    def __call__(
        self, candidate: Candidate, *, serving: frozenset[int] = ..., parked: frozenset[int] = ...
    ) -> None: ...


class Guard(Protocol):
    """The restart-loop guard (launcher/host/restart_guard.py) as the supervisor uses it."""

    def should_retry(self, fingerprint: str) -> bool: ...

    def record_failure(self, fingerprint: str, reason: str) -> Any: ...

    def record_success(self, fingerprint: str) -> None: ...

    def status(self, fingerprint: str) -> Any: ...


@dataclass
class Hooks:
    """Seams the host layer plugs into (preflight, GPU locks, restart guard, NVML, sd_notify, the watch)."""

    preflight: PreflightFn | None = None
    notifier: Notifier = field(default_factory=NullNotifier)
    gpu_bytes: Callable[[Any], int | None] | None = None
    gpu_locks: GpuLocksFn | None = None
    restart_guard: Callable[[Candidate], Guard] | None = None
    watch: WatchFactory | None = None  # the serving watch of what serves (None: only deaths are seen)
