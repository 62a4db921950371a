"""A scripted engine and scripted gate reports for the supervisor's seam (launcher/supervisor/
seams.py): no process, no thread, no sleep. They record what happened; they mock nothing.

Each start takes the next `Script` — how that engine behaves and what its gates report:

    engines = ScriptedEngines(passes(), rejected_by("health", "503"), passes())
    Supervisor(..., execute=Execute(engine=engines, gates=engines.report, sleep=ScriptedSleeps()))

A test makes a promoted engine die with `engines.latest.die(signal.SIGKILL)` (from a notifier
callback, say), which is what `group_watch` reports of a real one.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from basis.clock import Clock
from gates.chain import ChainReport
from gates.context import GpuBytesFn
from gates.outcome import GateResult, Verdict
from launcher.errors import GateError
from launcher.profile.candidate import Candidate
from launcher.supervisor.seams import Attempt, Death, GateProgress, LineSink, StopReport
from launcher.watch.verdict import Judgement
from launcher.watch.verdict import Verdict as JudgedVerdict

FIRST_PID = 40_000  # never signalled: a scripted engine has no process


@dataclass(frozen=True)
class Script:
    """One start: the gates' verdicts in order (name, passed, summary), an error `start()` raises
    instead, and lines the engine prints as it starts (the log-facts parser reads them)."""

    gates: tuple[tuple[str, bool, str], ...] = (("health", True, "200 OK"), ("tool_call", True, "2/2 cases"))
    start_error: GateError | None = None
    log: tuple[str, ...] = ()
    regate: tuple[tuple[str, bool, str], ...] = (("health", True, "200 OK"), ("tool_call", True, "2/2 cases"))


def passes(*log: str) -> Script:
    return Script(log=log)


def rejected_by(gate: str, summary: str) -> Script:
    return Script(gates=(("health", True, "200 OK"), (gate, False, summary)))


def fails_to_start(error: GateError) -> Script:
    return Script(start_error=error)


class ScriptedEngine:
    """seams.EngineHandle, played from a script."""

    def __init__(self, script: Script, pid: int, argv: Sequence[str], env: Mapping[str, str], sink: LineSink):
        self.script = script
        self.argv = list(argv)
        self.env = dict(env)
        self.sink = sink
        self._pid = pid
        self.started = False
        self.exited = threading.Event()
        self.death: Death | None = None
        self.stops: list[float] = []  # the grace of each stop()
        self.watch_calls = 0  # watch_every_process() calls: the supervisor's, before it serves
        self._on_exit: list[Callable[[], None]] = []
        self._on_death: list[Callable[[], None]] = []

    @property
    def pid(self) -> int | None:
        return self._pid if self.started else None

    @property
    def pgid(self) -> int | None:
        return self.pid

    def on_exit(self, callback: Callable[[], None]) -> None:
        self._on_exit.append(callback)

    def on_death(self, callback: Callable[[], None]) -> None:
        self._on_death.append(callback)

    def start(self) -> None:
        if self.script.start_error is not None:
            raise self.script.start_error
        self.started = True
        for line in self.script.log:
            self.sink("output", line + "\n")

    def die(self, sig: signal.Signals = signal.SIGKILL, name: str = "API server") -> None:
        """The engine dies on its own: recorded, callbacks run, as group_watch reports a real one."""
        self.death = Death(self._pid, name, int(sig), time.monotonic())
        for callback in self._on_death:
            callback()
        self._finish()

    def exit_description(self) -> str | None:
        if self.death is None or not self.exited.is_set():
            return None
        return self.death.how() if self.death.name == "API server" else self.death.describe()

    def process_tree(self) -> list[int]:
        return [] if self.pid is None or self.exited.is_set() else [self._pid]

    def group_members(self) -> list[int]:
        return self.process_tree()

    def watch_every_process(self) -> None:
        self.watch_calls += 1

    def stop(self, grace_s: float = 30.0) -> StopReport:
        self.stops.append(grace_s)
        self._finish()
        return StopReport(graceful=True, killed=False, leftovers=(), seconds=0.0)

    def _finish(self) -> None:
        if self.exited.is_set():
            return
        self.exited.set()
        for callback in self._on_exit:
            callback()


class ScriptedEngines:
    """The engine factory and the gate runner of the seam; one script per start, in order."""

    def __init__(self, *scripts: Script) -> None:
        self.scripts = list(scripts)
        self.started: list[ScriptedEngine] = []
        self.while_gating: list[Callable[[], None]] = []  # one step per gate run, before it judges
        self.asked: list[frozenset[str] | None] = []  # the `only` of each gate run

    def add(self, *scripts: Script) -> None:
        self.scripts.extend(scripts)

    @property
    def latest(self) -> ScriptedEngine:
        return self.started[-1]

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], sink: LineSink, log_path: Path | None = None
    ) -> ScriptedEngine:
        assert self.scripts, f"start {len(self.started) + 1} was not scripted"
        engine = ScriptedEngine(self.scripts.pop(0), FIRST_PID + len(self.started), argv, env, sink)
        self.started.append(engine)
        return engine

    def report(
        self,
        attempt: Attempt,
        progress: GateProgress,
        should_stop: Callable[[], bool],
        gpu_bytes: GpuBytesFn | None = None,
        only: frozenset[str] | None = None,
    ) -> ChainReport:
        """The scripted verdicts (`regate` when asked for `only` some gates: a woken engine); a stop
        request or a dead engine fails the gate being asked, as the chain runner does."""
        if self.while_gating:
            self.while_gating.pop(0)()
        engine = attempt.engine
        assert isinstance(engine, ScriptedEngine)
        results: list[GateResult] = []
        self.asked.append(only)
        for name, passed, summary in engine.script.regate if only is not None else engine.script.gates:
            if results and results[-1].blocks_promotion:
                skipped = "not run: an earlier required gate failed"
                results.append(GateResult(name, Verdict.SKIP, skipped, {}, 0.0))
                continue
            died = engine.exit_description()
            if should_stop():
                passed, summary = False, f"stopped by a signal while waiting: {summary}"
            elif died is not None:
                passed, summary = False, f"engine {died} while waiting: {summary}"
            results.append(GateResult(name, Verdict.PASS if passed else Verdict.FAIL, summary, {}, 0.0))
        attempt.report = ChainReport(tuple(results))
        return attempt.report


class ScriptedWatch:
    """seams.WatchHandle, played from a script: at `start()` it reports its judgement."""

    def __init__(
        self, judgement: Judgement | None, on_change: Callable[[Judgement], None], label: str
    ) -> None:
        self.scripted = judgement
        self.on_change = on_change
        self.label = label
        self.judgement = Judgement(JudgedVerdict.SERVING)
        self.started = False
        self.stopped = False
        self.evidence: list[tuple[str, str]] = []  # (verdict, action) of each bundle kept
        self.after_start: Callable[[], None] | None = None

    def start(self) -> None:
        self.started = True
        if self.scripted is not None:
            self.report(self.scripted)
        if self.after_start is not None:
            self.after_start()

    def report(self, judgement: Judgement) -> None:
        self.judgement = judgement
        self.on_change(judgement)

    def stop(self) -> None:
        self.stopped = True

    def keep_evidence(
        self,
        directory: Path,
        *,
        profile: str,
        label: str,
        judgement: Judgement,
        action: str,
        engine_log: Path,
    ) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{len(list(directory.iterdir()))}-{judgement.verdict}.txt"
        path.write_text(f"{profile} {label} {judgement.verdict} {action}\n")
        self.evidence.append((str(judgement.verdict), action))
        return path


class ScriptedWatches:
    """The watch factory of the seam: each watch started (one per engine that serves) takes the
    next scripted judgement (None: it stays quiet)."""

    def __init__(self, *judgements: Judgement | None) -> None:
        self.judgements = list(judgements)
        self.made: list[ScriptedWatch] = []
        self.at_start: dict[int, Callable[[], None]] = {}  # the Nth watch (from 1) runs this once started

    def __call__(
        self, candidate: object, engine: object, on_change: Callable[[Judgement], None]
    ) -> ScriptedWatch:
        judgement = self.judgements.pop(0) if self.judgements else None
        watch = ScriptedWatch(judgement, on_change, str(getattr(candidate, "label", "")))
        self.made.append(watch)
        step = self.at_start.pop(len(self.made), None)
        if step is not None:
            watch.after_start = step
        return watch


class ScriptedSleeps:
    """The sleep seam (supervisor/seams.py `SleepControl`), played from a script: each call is
    recorded with the port of the engine it went to; a value set in `fail` makes that call fail."""

    def __init__(self, **fail: str) -> None:
        self.fail = dict(fail)  # "sleep" | "wake" | "reset" -> why
        self.calls: list[tuple[str, int]] = []
        self.asleep: set[int] = set()
        self.on_call: Callable[[str], None] | None = None  # runs at each call (a fake clock moves on)
        self.greedy_text: dict[int, str] = {}  # each port's answer to the greedy prompt (a default per port)

    def __call__(self, candidate: Candidate, clock: Clock) -> ScriptedSleep:
        return ScriptedSleep(self, int(getattr(candidate, "port", 0)))


class ScriptedSleep:
    def __init__(self, sleeps: ScriptedSleeps, port: int) -> None:
        self.sleeps, self.port = sleeps, port

    def _call(self, name: str) -> str | None:
        self.sleeps.calls.append((name, self.port))
        if self.sleeps.on_call is not None:
            self.sleeps.on_call(name)
        return self.sleeps.fail.get(name)

    def sleep(self, timeout_s: float) -> str | None:
        why = self._call("sleep")
        if why is None:
            self.sleeps.asleep.add(self.port)
        return why

    def is_sleeping(self, timeout_s: float) -> bool | None:
        self.sleeps.calls.append(("is_sleeping", self.port))
        return self.port in self.sleeps.asleep

    def wake(self, timeout_s: float) -> str | None:
        why = self._call("wake")
        if why is None:
            self.sleeps.asleep.discard(self.port)
        return why

    def reset_prefix_cache(self, timeout_s: float) -> str | None:
        return self._call("reset")

    def greedy(self, timeout_s: float) -> tuple[str | None, str | None]:
        why = self._call("greedy")
        if why is not None:
            return None, why
        return self.sleeps.greedy_text.get(self.port, f" 2, 3, 5, 7 (the engine on port {self.port})"), None
