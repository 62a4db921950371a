"""The supervisor's seams in one place (as tox's `Execute`): what crosses between the serving state's
collaborators and what they drive (the engine, the judge, vLLM's sleep routes, the host-safety layer,
the front door, systemd) as Protocols and plain values (`Execute`, `Hooks`, `EngineHandle`, `Attempt`).
It imports none of their implementers (test_supervisor_structure.py); `wiring.py` alone plugs the real
ones in, a unit test scripted ones (tests/engine_double.py, tests/supervisor_rig.py): no process."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from basis.clock import Clock
from gates.context import GpuBytesFn, LogView
from launcher.supervisor.history import utc_now

if TYPE_CHECKING:
    from gates.chain import ChainReport
    from gates.outcome import Outcome
    from launcher.logfacts.timeline_report import StartMarks
    from launcher.profile.candidate import Candidate
    from launcher.watch.verdict import Judgement

LineSink = Callable[[str, str], None]  # (stream name, text chunk)
SOURCE_WAIT = "waitpid"  # the launcher's own child
SOURCE_ZOMBIE = "/proc/PID/stat"  # read while it was a zombie
SOURCE_CONNECTOR = "process connector"  # the kernel's exit event


# ---- what the engine reports --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Death:
    """The first process of the engine that ended: `VLLM::EngineCore pid 4360 killed by SIGKILL`."""

    pid: int
    name: str
    wait_status: int | None  # as waitpid(2) reports it; None when it could not be read
    noticed_at: float  # the clock's monotonic() when the launcher saw it
    source: str | None = None  # what told the status: SOURCE_* above

    @classmethod
    def from_returncode(cls, pid: int, name: str, returncode: int, noticed_at: float) -> Death:
        status = (-returncode) & 0x7F if returncode < 0 else (returncode & 0xFF) << 8
        return cls(pid, name, status, noticed_at, SOURCE_WAIT)

    def how(self) -> str:
        if self.wait_status is None:
            return "exited (status not readable: its parent collected it first)"
        if os.WIFSIGNALED(self.wait_status):
            sig = os.WTERMSIG(self.wait_status)
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(sig).name}"
            return f"killed by signal {sig}"
        return f"exited with code {os.WEXITSTATUS(self.wait_status)}"

    def describe(self) -> str:
        return f"{self.name} pid {self.pid} {self.how()}"


@dataclass(frozen=True, slots=True)
class StopReport:
    graceful: bool  # the group ended on SIGTERM within the grace period
    killed: bool  # SIGKILL was needed
    leftovers: tuple[int, ...]  # pids of the group still there after everything (should be empty)
    seconds: float


# ---- the engine and one start of it ---------------------------------------------------------------
class EngineHandle(Protocol):
    """One engine: constructing it starts nothing; `start()` spawns it, `stop()` ends all of it."""

    exited: threading.Event  # set once the engine is dead (any vital process of it)
    death: Death | None  # the first of its processes that ended, and how

    @property
    def pid(self) -> int | None: ...

    @property
    def pgid(self) -> int | None: ...

    def on_exit(self, callback: Callable[[], None]) -> None: ...

    def on_death(self, callback: Callable[[], None]) -> None: ...

    def start(self) -> None: ...

    def exit_description(self) -> str | None: ...

    def process_tree(self) -> list[int]: ...

    def watch_every_process(self) -> None:
        """Every vital process is watched from now on (not at the next re-read): before it serves."""

    def group_members(self) -> list[int]: ...

    def stop(self, grace_s: float) -> StopReport: ...


class EngineFactory(Protocol):
    """Makes an engine for `argv`/`env`; its output goes to `sink` (and, by the log keeper, `log_path`)."""

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], sink: LineSink, log_path: Path | None = None
    ) -> EngineHandle: ...


class AttemptLog(LogView, Protocol):
    """The live log of one start as its attempt uses it (livelog.LiveLog): the gates' view, and its end."""

    def flush(self) -> None: ...

    def keep_tail(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class Attempt:
    """One start: engine, live log, the chain's report, what it holds (let go once its group is gone)."""

    candidate: Candidate
    engine: EngineHandle
    log: AttemptLog
    started_at: str = field(default_factory=utc_now)
    report: ChainReport | None = None
    held: ExitStack = field(default_factory=ExitStack)  # GPU locks, released once the group is gone
    greedy: str | None = None  # its answer to the fixed greedy prompt once it served: a wake must repeat it
    slept: int = 0  # how often it was put to sleep (the first sleep pins host buffers: it costs more)
    marks: StartMarks | None = None  # what the launcher saw of its start (its timeline's frame)

    @property
    def passed(self) -> bool:
        return self.report is not None and self.report.passed

    def stop(self, grace_s: float) -> StopReport:
        try:
            report = self.engine.stop(grace_s=grace_s)
        finally:
            self.log.flush()
            self.log.close()
            self.held.close()
        return report

    def facts(self) -> dict[str, object]:
        return dict(self.log.facts())


class GateProgress(Protocol):
    """Where the judge reports each gate (progress.Progress)."""

    def on_gate(self, index: int, total: int, name: str, outcome: Outcome | None) -> None: ...


class GateRunner(Protocol):
    """Judges a started attempt (early out on `should_stop`); `only`: just these gates (a woken engine)."""

    def __call__(
        self,
        attempt: Attempt,
        progress: GateProgress,
        should_stop: Callable[[], bool],
        gpu_bytes: GpuBytesFn | None = None,
        only: frozenset[str] | None = None,
    ) -> ChainReport: ...


class SleepControl(Protocol):
    """vLLM's sleep routes of one engine; each returns None on success, else why it failed."""

    def sleep(self, timeout_s: float) -> str | None: ...

    def is_sleeping(self, timeout_s: float) -> bool | None: ...

    def wake(self, timeout_s: float) -> str | None: ...

    def reset_prefix_cache(self, timeout_s: float) -> str | None: ...

    def greedy(self, timeout_s: float) -> tuple[str | None, str | None]:
        """The engine's answer to the fixed greedy prompt (temperature 0): (text, None), or (None, why)."""
        ...


SleepFactory = Callable[["Candidate", Clock], SleepControl]  # vLLM's routes of one engine


@dataclass(frozen=True, slots=True)
class Execute:
    """A start's engine, its judge, its sleep and wake (park = "sleep"); real: `wiring.real_execute()`."""

    engine: EngineFactory
    gates: GateRunner
    sleep: SleepFactory


# ---- the host-safety layer, the operator and systemd -----------------------------------------------
class PhaseLine(Protocol):
    """Where a phase change is announced to the operator (progress.Progress)."""

    def set_phase(self, phase: str, **fields: Any) -> None: ...


class Notifier(Protocol):
    """What the supervisor tells the service manager (sd_notify: launcher/host/notify.py)."""

    def ready(self, status: str) -> object: ...

    def status(self, text: str) -> object: ...

    def reloading(self) -> object: ...

    def stopping(self) -> object: ...

    def watchdog(self) -> object: ...

    def extend_timeout(self, seconds: float) -> object: ...


class NullNotifier:
    """Not under systemd: nothing to tell (each call does nothing)."""

    def ready(self, status: str) -> None: ...

    def status(self, text: str) -> None: ...

    def reloading(self) -> None: ...

    def stopping(self) -> None: ...

    def watchdog(self) -> None: ...

    def extend_timeout(self, seconds: float) -> None: ...


@dataclass(frozen=True, slots=True)
class DrainReport:
    """A drain's end: requests still in flight (`left`; None: unknown, `problem` says why), seconds waited."""

    port: int
    left: int | None
    waited_s: float
    problem: str | None = None


class FrontDoor(Protocol):
    """The front door (launcher/frontdoor/) as steered: where requests go, what is in flight; never raises."""

    @property
    def url(self) -> str: ...

    def point_at(self, port: int | None) -> str | None:
        """Send requests to the engine on `port`; None: hold them at the door. Why it failed, or None."""

    def drain(self, port: int, timeout_s: float) -> DrainReport:
        """Wait until the engine on `port` has no request in flight, or `timeout_s` passed."""


class GpuLocksFn(Protocol):
    """The candidate's GPU locks, held for its engine's life. `sharing`: our engine asleep or serving
    beside it, whose locks it borrows (it takes only those of GPUs that engine does not hold)."""

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
WatchFactory = Callable[["Candidate", EngineHandle, Callable[["Judgement"], None]], WatchHandle]


class PreflightFn(Protocol):
    """Raises PreflightRefused (exit 4). `serving`: what a reload stops only once this passed (counts
    as free); `parked`: our engines that stay on the GPUs, asleep or serving beside a trial (counted as
    used, not a second model); `margin_bytes`: asked beyond vLLM's own check (a trial beside)."""

    def __call__(
        self,
        candidate: Candidate,
        *,
        serving: frozenset[int] = ...,
        parked: frozenset[int] = ...,
        margin_bytes: int = ...,
    ) -> None: ...


class TrialPower(Protocol):
    """The GPUs' power limits for a trial beside production (launcher/host/power_caps.py)."""

    def lower(self, candidate: Candidate, watts: float) -> str | None: ...

    def restore(self) -> list[str]: ...


# The candidate's GPU load locks, held until its engine is ready or gone (never two loads on one GPU at
# once); a wait for another engine's load is said through the second argument.
LoadingFn = Callable[["Candidate", Callable[[str], None]], AbstractContextManager[object]]


class Guard(Protocol):
    """The restart-loop guard (launcher/host/restart_guard.py) as the supervisor uses it."""

    def should_retry(self, fingerprint: str) -> bool: ...

    def record_failure(self, fingerprint: str, reason: str) -> Any: ...

    def record_success(self, fingerprint: str) -> None: ...

    def status(self, fingerprint: str) -> Any: ...


@dataclass
class Hooks:
    """What the host layer plugs in (`wiring.host_hooks`); None: not wired (a test, `launch try`)."""

    preflight: PreflightFn | None = None
    notifier: Notifier = field(default_factory=NullNotifier)
    gpu_bytes: GpuBytesFn | None = None
    gpu_locks: GpuLocksFn | None = None
    restart_guard: Callable[[Candidate], Guard] | None = None
    watch: WatchFactory | None = None  # the serving watch of what serves (None: only deaths are seen)
    front_door: Callable[[Candidate], FrontDoor | None] | None = None  # None: the profile has none
    power: TrialPower | None = None  # the GPUs' power limits (None: not wired; `power_limit_w` unmet)
    loading: LoadingFn | None = None  # the GPU load locks (None: not wired, no lock taken)
