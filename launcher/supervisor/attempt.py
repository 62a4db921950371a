"""One start of one candidate: spawn the engine, feed its log, run the gate chain on it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from basis.clock import SystemClock
from basis.setting import SettingValues
from gates.chain import ChainReport, ChainRunner
from gates.context import GateContext
from gates.registry import GATE_SETTINGS, build_chain
from launcher.host.orphans import mark_env
from launcher.supervisor.adapters import ProcessMemory, RequestsHttp
from launcher.supervisor.candidate import Candidate
from launcher.supervisor.engine import EngineProcess
from launcher.supervisor.livelog import LiveLog
from launcher.supervisor.progress import Progress
from launcher.supervisor.seams import Attempt, EngineFactory, EngineHandle, GateProgress, GpuBytesFn


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
) -> Attempt:
    """`deployment` marks vLLM's processes as this deployment's (launcher/host/orphans.py);
    `engine_factory` is the engine seam (seams.py): the real process group unless a test
    passes a scripted engine."""
    marker_gate = SettingValues.of(GATE_SETTINGS["kernel_marker"], candidate.gate_tables.get("kernel_marker"))
    markers = marker_gate.value("patterns")
    log = LiveLog(None, on_event=progress.on_log_event, markers=list(markers))  # the keeper writes the file
    env = candidate.process_env()
    if deployment is not None:
        env.update(mark_env(deployment))
    engine = engine_factory(candidate.argv, env, sink=log.feed, log_path=log_path)

    def engine_gone() -> None:
        log.flush()
        log.notify()

    engine.on_exit(engine_gone)
    engine.on_death(log.notify)  # gates waiting on the log see the death at once
    engine.start()
    return Attempt(candidate=candidate, engine=engine, log=log)


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
        clock=SystemClock(),
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
