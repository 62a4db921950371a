"""One attempt's life on the box, the same for `launch` (serve), `launch try` and `launch probe`'s
arms: take the candidate's GPU locks, spawn the engine, feed its log, run the gate chain on it,
and end it on a stop signal.

`launch_attempt` takes the locks and starts the candidate (`start_attempt`), and either releases
the locks at once (the start failed) or hands them to the attempt, which lets go of them only once
its whole process group is gone (`Attempt.stop`): one model per GPU set holds for every engine any
of the three starts. `gate_attempt` is the real judge (the chain over HTTP and the live log).

Signals: the handlers only record the signal and wake the main loop (`SignalInbox`, as gunicorn's
arbiter does); what a stop needs done at once — ending the engine, so that a gate blocked in HTTP
returns — runs on one helper thread (`StopOnSignal`), never in the handler.
"""

from __future__ import annotations

import signal
import threading
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from types import FrameType, TracebackType

from basis.clock import SYSTEM_CLOCK, Clock
from basis.setting import SettingValues
from gates.chain import ChainReport, ChainRunner
from gates.context import GateContext, GpuBytesFn
from gates.registry import GATE_SETTINGS, build_chain
from launcher.host.adapters import ProcessMemory, RequestsHttp
from launcher.host.orphans import mark_env
from launcher.host.page_cache import model_cached_share
from launcher.logfacts.events import EventKind, LogEvent
from launcher.logfacts.timeline_report import StartMarks
from launcher.profile.candidate import Candidate
from launcher.profile.keys import engine_settings
from launcher.supervisor.engine import EngineProcess
from launcher.supervisor.livelog import LiveLog
from launcher.supervisor.progress import Progress
from launcher.supervisor.seams import (
    Attempt,
    EngineFactory,
    EngineHandle,
    GateProgress,
    GpuLocksFn,
    LoadingFn,
)

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what SignalInbox records
CLOSE_CHECK_S = 0.2  # how long a closed StopOnSignal helper may linger; a stop request is seen at once


class EngineView:
    """gates.context.ServerView over the engine process."""

    def __init__(self, engine: EngineHandle) -> None:
        self.engine = engine

    def alive(self) -> bool:
        return not self.engine.exited.is_set()

    def exit_description(self) -> str | None:
        return self.engine.exit_description()

    def process_tree(self) -> Sequence[int]:
        return self.engine.process_tree()


def start_attempt(
    candidate: Candidate,
    log_path: Path,
    progress: Progress,
    *,
    deployment: str | None = None,
    engine_factory: EngineFactory = EngineProcess,
    on_loaded: Callable[[], None] | None = None,
) -> Attempt:
    """`deployment` marks vLLM's processes as this deployment's (launcher/host/orphans.py);
    `engine_factory` is the engine seam (seams.py): the real process group unless a test
    passes a scripted engine; `on_loaded` runs once the log says it is ready or failed (or it exits)."""
    marker_gate = SettingValues.of(GATE_SETTINGS["kernel_marker"], candidate.gate_tables.get("kernel_marker"))
    markers = marker_gate.value("patterns")

    def on_event(event: LogEvent) -> None:  # from the log's reader, once the engine runs (and `marks` is)
        progress.on_log_event(event)
        if event.kind is EventKind.READY:
            marks.saw_ready()
        if on_loaded is not None and event.kind in (EventKind.READY, EventKind.FAILED):
            on_loaded()

    log = LiveLog(None, on_event=on_event, markers=list(markers))  # the keeper writes the file
    env = candidate.process_env()
    if deployment is not None:
        env.update(mark_env(deployment))
    engine = engine_factory(candidate.argv, env, sink=log.feed, log_path=log_path)

    def engine_gone() -> None:
        log.flush()
        log.notify()

    engine.on_exit(engine_gone)
    if on_loaded is not None:
        engine.on_exit(on_loaded)
    engine.on_death(log.notify)  # gates waiting on the log see the death at once
    # the frame of its timeline: what its weights' GB/s will be measured against, read before vLLM
    # reads them, and the spawn on the launcher's clock
    cached = model_cached_share(engine_settings(candidate.profile_data).optional_text("model"))
    marks = StartMarks(SYSTEM_CLOCK.monotonic, weights_cached=cached)
    engine.start()
    return Attempt(candidate=candidate, engine=engine, log=log, marks=marks)


def gate_attempt(
    attempt: Attempt,
    progress: GateProgress,
    should_stop: Callable[[], bool],
    gpu_bytes: GpuBytesFn | None = None,
    only: frozenset[str] | None = None,
) -> ChainReport:
    candidate = attempt.candidate
    http = RequestsHttp(candidate.base_url, candidate.api_key())
    ctx = GateContext(
        clock=SYSTEM_CLOCK,
        http=http,
        log=attempt.log,
        server=EngineView(attempt.engine),
        memory=ProcessMemory(gpu_bytes),
        expect=candidate.expect,
    )
    order = [name for name in candidate.gate_order if only is None or name in only]
    gates = build_chain(order or ["health"], candidate.gate_tables)
    try:
        report = ChainRunner(gates, on_progress=progress.on_gate, should_stop=should_stop).run(ctx)
    finally:
        http.close()
        attempt.log.keep_tail()  # no gate reads lines any more: memory stays flat while serving
    attempt.report = report
    return report


def launch_attempt(
    candidate: Candidate,
    log_path: Path,
    progress: Progress,
    *,
    gpu_locks: GpuLocksFn | None,
    deployment: str | None = None,
    engine_factory: EngineFactory = EngineProcess,
    sharing: Candidate | None = None,
    loading: LoadingFn | None = None,
) -> Attempt:
    """Start `candidate` holding its GPU locks; a start that raises releases them before it returns.

    `gpu_locks` is `Hooks.gpu_locks` (None where the host layer is not wired: no locks to take);
    `deployment` marks the engine's processes as this deployment's (launcher/host/orphans.py);
    `engine_factory` is the engine seam (seams.py), the real process group by default;
    `sharing`: an engine of this launcher (asleep, or serving beside the trial) whose locks cover
    these GPUs (supervisor/park.py, beside.py); `loading`: `Hooks.loading`, the GPU load locks, held
    until the engine is ready or gone (a wait for another engine's load is said on the progress line)."""
    with ExitStack() as locks:
        if gpu_locks is not None:
            held = gpu_locks(candidate, sharing=sharing) if sharing is not None else gpu_locks(candidate)
            locks.enter_context(held)  # before the start: two models never share a GPU
        loaded = _Once(ExitStack())
        locks.callback(loaded)  # let go with the GPU locks at the latest
        if loading is not None:
            said = partial(progress.message, event="gpu.load_wait")
            loaded.stack.enter_context(loading(candidate, said))
        attempt = start_attempt(
            candidate,
            log_path,
            progress,
            deployment=deployment,
            engine_factory=engine_factory,
            on_loaded=loaded,
        )
        attempt.held.enter_context(locks.pop_all())  # the engine's now: released after its group is gone
    return attempt


class _Once:
    """Closes its stack (the load locks) the first time it is called, from whichever thread."""

    def __init__(self, stack: ExitStack) -> None:
        self.stack = stack
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.stack.close()


class SignalInbox:
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._pending: deque[signal.Signals] = deque()
        self._previous: dict[int, object] = {}
        self.stop_requested = threading.Event()
        self.stop_signal = "a stop"  # the name of the signal that set `stop_requested`, for the log

    def install(self) -> None:
        for sig in HANDLED:
            self._previous[sig] = signal.signal(sig, self._record)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _record(self, signum: int, frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        self._pending.append(sig)
        if sig in (signal.SIGTERM, signal.SIGINT):
            self.stop_signal = sig.name
            self.stop_requested.set()
        self._wake()

    def take(self) -> list[signal.Signals]:
        taken = []
        while self._pending:
            taken.append(self._pending.popleft())
        return taken


class StopOnSignal:
    """`with StopOnSignal(requested, action):` — while open, `action` runs once on a helper thread
    as soon as `requested` is set (serve, try and probe: end the engine, so that a gate blocked in
    HTTP returns at once). After the block, `action` never starts; leaving waits for a running one."""

    def __init__(
        self,
        requested: threading.Event,
        action: Callable[[], object],
        *,
        name: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._requested = requested
        self._clock = clock
        self._action = action
        self._name = name
        self._closed = False
        self._lock = threading.Lock()  # `action` runs under it: closing waits for it to end

    def __enter__(self) -> StopOnSignal:
        threading.Thread(target=self._wait, name=self._name, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:
            self._closed = True  # the thread sees it within CLOSE_CHECK_S and ends; no need to wait

    def _wait(self) -> None:
        while not self._clock.wait(self._requested, CLOSE_CHECK_S):
            if self._closed:
                return
        with self._lock:
            if not self._closed:
                self._action()
