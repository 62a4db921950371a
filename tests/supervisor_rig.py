"""The supervisor's collaborators as units: one profile `svc` in a scratch state dir, the real state
store, status board, history and transitions, a fake clock, and the seams played by doubles
(tests/engine_double.py): no process, no thread of ours, no sleep.

    rig = Rig(tmp_path, passes(), rejected_by("health", "503"))
    attempt = rig.serve(rig.candidate())           # what serves, as a promotion leaves it
    rig.parker.park_for(rig.candidate(max_num_seqs=8))

The doubles of the host layer (`Notices`, `Preflight`, `GpuLocks`) record what they were asked;
tests/unit/test_supervisor_decisions.py drives the whole `Supervisor.run` with the same ones.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from launcher.errors import PreflightRefused
from launcher.host.orphans import deployment_id
from launcher.host.restart_guard import RestartGuard
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.attempt import SignalInbox
from launcher.supervisor.beside import Beside
from launcher.supervisor.bringup import Bringup
from launcher.supervisor.context import Context
from launcher.supervisor.history import History
from launcher.supervisor.lending import Lending
from launcher.supervisor.park import Parker
from launcher.supervisor.progress import Progress
from launcher.supervisor.recovery import Recovery
from launcher.supervisor.reload import Reloader
from launcher.supervisor.seams import Attempt, DrainReport, Execute, Hooks
from launcher.supervisor.stage import Stage
from launcher.supervisor.state import ServingState
from launcher.supervisor.status import StatusBoard, Transitions, read_status
from tests.doubles import FakeClock
from tests.engine_double import Script, ScriptedEngine, ScriptedEngines, ScriptedSleeps, ScriptedWatches
from tests.launcher_run import append_table, write_profile

PORT = 18123  # nothing listens: the engine is scripted and preflight is a double


class Notices:
    """The notifier seam: records what systemd would hear, and runs the test's next step at each
    READY=1 (a promotion, last-good serving, a reload that kept the engine)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.at_ready: list[Callable[[], None]] = []
        self.at_status: list[tuple[str, Callable[[], None]]] = []  # (STATUS= prefix, step), in order

    def ready(self, status: str) -> None:
        self.calls.append(("ready", status))
        if self.at_ready:
            self.at_ready.pop(0)()

    def status(self, text: str) -> None:
        self.calls.append(("status", text))
        if self.at_status and text.startswith(self.at_status[0][0]):
            self.at_status.pop(0)[1]()

    def reloading(self) -> None:
        self.calls.append(("reloading", ""))

    def stopping(self) -> None:
        self.calls.append(("stopping", ""))

    def watchdog(self) -> None:
        self.calls.append(("watchdog", ""))

    def extend_timeout(self, seconds: float) -> None:
        pass


class Preflight:
    """The preflight seam: refuses the candidates whose fingerprint is listed, records each call."""

    def __init__(self) -> None:
        self.refuse: dict[str, str] = {}  # fingerprint -> why
        self.refuse_once_stopped: dict[str, str] = {}  # only when no serving engine is counted as free
        self.calls: list[tuple[str, frozenset[int]]] = []
        self.parked_calls: list[frozenset[int]] = []
        self.margins: list[int] = []
        self.no_room_beside: str | None = None  # refuses a check that asks for a margin (a trial beside)
        # only the start's own check beside an engine of ours (the checks before it passed): a port
        # or GPU memory taken by someone else in between
        self.refuse_at_start: dict[str, str] = {}

    def __call__(
        self,
        candidate: Candidate,
        *,
        serving: frozenset[int] = frozenset(),
        parked: frozenset[int] = frozenset(),
        margin_bytes: int = 0,
    ) -> None:
        self.calls.append((candidate.fingerprint, serving))
        self.parked_calls.append(parked)
        self.margins.append(margin_bytes)
        if margin_bytes and self.no_room_beside is not None:
            raise PreflightRefused(self.no_room_beside)
        why = self.refuse.get(candidate.fingerprint)
        if why is None and not serving:
            why = self.refuse_once_stopped.get(candidate.fingerprint)
        if why is None and parked and not margin_bytes:
            why = self.refuse_at_start.get(candidate.fingerprint)
        if why is not None:
            raise PreflightRefused(f"preflight refused: {why}")


class GpuLocks:
    """The GPU-lock seam: records when each candidate's locks are taken and given back; a label in
    `held_by_other` is refused, as an arm that still holds the GPUs refuses a lock."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.held_by_other: set[str] = set()

    @contextmanager
    def __call__(self, candidate: Candidate, *, sharing: Candidate | None = None) -> Iterator[None]:
        if sharing is not None:
            self.log.append(f"share {sharing.label} with {candidate.label}")
            yield
            return
        if candidate.label in self.held_by_other:
            raise PreflightRefused(f"GPU 0 is locked by another engine ({candidate.label})")
        self.log.append(f"take {candidate.label}")
        try:
            yield
        finally:
            self.log.append(f"release {candidate.label}")


class Power:
    """The power seam (seams.TrialPower): records each lowering and restore; `refuse` is NVML's word."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.refuse: str | None = None

    def lower(self, candidate: Candidate, watts: float) -> str | None:
        if self.refuse is not None:
            self.log.append(f"refused {watts:g}")
            return self.refuse
        self.log.append(f"lower {watts:g}")
        return None

    def restore(self) -> list[str]:
        self.log.append("restore")
        return []


class Terminal(io.StringIO):
    def isatty(self) -> bool:  # one progress line per step, no structlog
        return True


class GpuMemory:
    """The NVML seam: GPU bytes per pid as the test sets them (None: no NVML on this host)."""

    def __init__(self) -> None:
        self.by_pid: dict[int, int] = {}
        self.reads = 0
        self.on_read: Callable[[], None] | None = None  # runs before each read (time passes, memory goes)

    def __call__(self, pids: Any) -> int | None:
        self.reads += 1
        if self.on_read is not None:
            self.on_read()
        return sum(self.by_pid.get(pid, 0) for pid in pids)


class ScriptedDoor:
    """The front-door seam (seams.FrontDoor): records each pointing (a port, or None: held) and each
    drain; a drain leaves `left` requests in flight (None: the door could not tell)."""

    url = "http://127.0.0.1:9000"

    def __init__(self) -> None:
        self.pointed: list[int | None] = []
        self.drained: list[tuple[int, float]] = []
        self.left: int | None = 0
        self.problem: str | None = None  # what every pointing answers (None: it worked)

    def point_at(self, port: int | None) -> str | None:
        self.pointed.append(port)
        return self.problem

    def drain(self, port: int, timeout_s: float) -> DrainReport:
        self.drained.append((port, timeout_s))
        why = None if self.left is not None else "the front door's admin API did not answer"
        return DrainReport(port, self.left, 0.5, why)


class Rig:
    """The collaborators of one launcher, built as `service.Supervisor` builds them."""

    def __init__(
        self,
        tmp: Path,
        *scripts: Script,
        supervisor: dict[str, Any] | None = None,
        frontdoor: dict[str, Any] | None = None,
    ) -> None:
        self.frontdoor = frontdoor  # a `[frontdoor]` table: the profile has a front door (the rig's door)
        self.profiles = tmp / "profiles"
        self.profiles.mkdir(exist_ok=True)
        self.state_dir = tmp / "state"
        self.supervisor = dict(supervisor or {})
        self.engines = ScriptedEngines(*scripts)
        self.sleeps = ScriptedSleeps()
        self.notices = Notices()
        self.preflight = Preflight()
        self.gpu_locks = GpuLocks()
        self.gpu_memory = GpuMemory()
        self.watches = ScriptedWatches()
        self.door = ScriptedDoor()
        self.power = Power()
        self.clock = FakeClock()
        self.store = StateStore(self.state_dir)
        self.guard = RestartGuard(self.store, "svc", max_failures=2, window_s=600.0)
        self.terminal = Terminal()
        self.hooks = Hooks(
            preflight=self.preflight,
            notifier=self.notices,
            gpu_bytes=self.gpu_memory,
            gpu_locks=self.gpu_locks,
            restart_guard=lambda _: self.guard,
            watch=self.watches,
            front_door=lambda candidate: self.door if "frontdoor" in candidate.profile_data else None,
            power=self.power,
        )
        self.wake = threading.Event()
        self.inbox = SignalInbox(self.wake.set)
        progress = Progress(self.terminal, notifier=self.notices, clock=self.clock)
        board = StatusBoard(self.store.status_path("svc"), "svc", clock=self.clock)
        self.history = History(self.store.history_path)
        self.ctx = Context(
            profile="svc",
            options=GlobalOptions(self.profiles, self.state_dir),
            store=self.store,
            transitions=Transitions("svc", board, self.history, progress, self.notices),
            progress=progress,
            hooks=self.hooks,
            execute=Execute(engine=self.engines, gates=self.engines.report, sleep=self.sleeps),
            clock=self.clock,
            state=ServingState(),
            inbox=self.inbox,
            wake=self.wake,
            deployment=deployment_id(self.state_dir, "svc"),
        )
        self.stage = Stage(self.ctx)
        self.parker = Parker(self.ctx, self.stage)
        self.bringup = Bringup(self.ctx, self.stage, self.parker)
        self.recovery = Recovery(self.ctx, self.stage, self.bringup)
        self.lending = Lending(self.ctx, self.stage, self.parker, self.recovery)
        self.beside = Beside(self.ctx, self.stage, self.parker, self.bringup)
        self.reloader = Reloader(self.ctx, self.stage, self.bringup, self.parker, self.lending, self.beside)
        self.write()

    @property
    def state(self) -> ServingState:
        return self.ctx.state

    def write(self, supervisor: dict[str, Any] | None = None, **args: Any) -> Candidate:
        """Write the profile `svc` (its `[supervisor]`: the rig's, updated by `supervisor`; its
        `[frontdoor]`: the rig's `frontdoor`, when set); its candidate."""
        table = {**self.supervisor, **(supervisor or {})}
        path = write_profile(self.profiles, "svc", PORT, args=args, supervisor=table or None)
        if self.frontdoor is not None:
            append_table(path, "frontdoor", self.frontdoor)
        return self.candidate_now()

    def candidate(self, supervisor: dict[str, Any] | None = None, **args: Any) -> Candidate:
        """The candidate of the profile with these changes, written to the file."""
        return self.write(supervisor, **args)

    def candidate_now(self) -> Candidate:
        return Candidate.from_plan(build_plan(self.profiles, "svc"))

    def serve(self, candidate: Candidate) -> Attempt:
        """Start `candidate` and make it what serves, as a promotion leaves it (no gates, no record)."""
        attempt = self.bringup.spawn(candidate)
        self.state.promote_trial(last_good=False)
        self.stage.record_promotion(candidate, [])
        return attempt

    def engine(self, attempt: Attempt) -> ScriptedEngine:
        assert isinstance(attempt.engine, ScriptedEngine)
        return attempt.engine

    # what it left
    def events(self) -> list[str]:
        return [str(r["event"]) for r in self.history.read()]

    def record(self, event: str) -> dict[str, Any]:
        return next(r for r in reversed(self.history.read()) if r["event"] == event)

    def status(self) -> dict[str, Any]:
        found = read_status(self.store.status_path("svc"))
        assert found is not None
        return found
