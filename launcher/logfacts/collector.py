"""The startup state machine: clean records in, facts and events out (one `Startup` per banner).

A fact can be stated by several lines; each source has a rank and a lower rank never overwrites a
higher one: what vLLM built (engine config line, explicit log lines: 3) beats what it was asked
(args: 2) beats a command line echoed by a shell or a unit (1).
"""

from __future__ import annotations

from typing import Any

from launcher.logfacts import patterns as p
from launcher.logfacts.events import EventKind, LogEvent
from launcher.logfacts.failure import (
    CAPTURE_FRAMES,
    ENGINE,
    EXIT,
    EXPLICIT,
    Cause,
    FailureKind,
    classify,
    frame_of,
    frame_phase,
    is_logged_startup_traceback,
    process_exit,
)
from launcher.logfacts.handlers import DISPATCH, Handler
from launcher.logfacts.history import History
from launcher.logfacts.lines import EXCEPTION_LINE, Record
from launcher.logfacts.markers import MarkerSet
from launcher.logfacts.startup import Startup


class Collector:
    """Feed it records and bar segments in log order; `events` accumulates until the caller takes them."""

    def __init__(self, markers: MarkerSet) -> None:
        self.markers = markers
        self.startup = Startup(markers.patterns)
        self.startups_seen = 0
        self.history = History()
        self.command: dict[str, Any] = {}  # facts of the last echoed command line, for later startups
        self.events: list[LogEvent] = []

    # ---- entry points --------------------------------------------------------------------------
    def on_record(self, rec: Record, line_no: int) -> None:
        msg = rec.msg
        if rec.ts is not None:
            self.startup.stamps.last = rec.ts
        called: list[Handler] = []
        for needle, handler in DISPATCH:
            if needle in msg and handler not in called:  # one call per handler, however many needles hit
                called.append(handler)
                handler(self, rec, line_no)
        if rec.level in (None, "ERROR", "CRITICAL") or (rec.level == "WARNING" and p.ENGINE_DIED.search(msg)):
            # 0.26 says the engine died at WARNING: `[shutdown] MPClient: engine core exited unexpectedly`
            self._check_failure(rec, line_no)
        if self.markers.patterns:
            for i in self.markers.matching(rec):
                self.startup.mark(i, rec.text, line_no, self.emit)

    def on_bar(self, desc: str, n: int, total: int, rec: Record, line_no: int) -> None:
        """One bar redraw; `rec` is the segment it was drawn in, `rec.proc` the rank that drew it."""
        s = self.startup
        if "checkpoint shards" in desc:
            if s.shards != (n, total):
                s.shards = (n, total)
                self.emit(EventKind.LOADING_WEIGHTS, rec, line_no, desc=desc, n=n, total=total)
            return
        if "decode, " in desc or "mixed prefill-decode" in desc:
            s.infer("model_runner", "v1", rec.text, line_no)  # only the V1 runner labels its bars (§3.3)
        s.infer("enforce_eager", False, rec.text, line_no)  # graphs are being captured
        phase = s.capture.on_bar(desc, n, total, rec.proc)
        if phase == "final":
            self.emit(EventKind.CAPTURING_GRAPHS, rec, line_no, desc=desc, n=n, total=total)
        elif phase == "profiling":
            self.once(EventKind.PROFILING, rec, line_no)

    # ---- helpers -------------------------------------------------------------------------------
    def emit(self, kind: EventKind, rec: Record, line_no: int, **detail: Any) -> None:
        self.startup.activity = True
        self.startup.seen.add(kind)
        self.events.append(LogEvent(kind, rec.text, line_no, detail))

    def once(self, kind: EventKind, rec: Record, line_no: int, **detail: Any) -> None:
        if kind not in self.startup.emitted:
            self.startup.emitted.add(kind)
            self.emit(kind, rec, line_no, **detail)

    def set_all(self, values: dict[str, Any], rank: int) -> None:
        for key, value in values.items():
            self.startup.set(key, value, rank)

    def _fail(self, cause: Cause, rec: Record, line_no: int) -> None:
        s = self.startup
        if s.outcome == "ready":
            if s.died_after_ready is None and not s.shutdown_seen:
                s.died_after_ready = (rec.text, line_no)
                self.emit(EventKind.ENGINE_DIED, rec, line_no)
            return
        if s.failure is None or cause.rank > s.failure[0].rank:
            s.failure = (cause, rec.text, line_no, rec.msg)
            s.failure_proc = rec.label
            s.failure_phase = s.phase()
            s.outcome = "failed"
            self.emit(EventKind.FAILED, rec, line_no, cause=str(cause.kind))

    def _check_failure(self, rec: Record, line_no: int) -> None:
        s = self.startup
        self._read_frame(rec, line_no)
        header = rec.msg.startswith("Traceback (most recent call last)")
        if header:
            s.traceback_seen = True
        if s.outcome != "ready" and is_logged_startup_traceback(rec):
            # the engine core's or a worker's `logger.exception` at startup: a failure even where the
            # excerpt lacks the generic line and the exception (a more specific cause replaces it)
            self._fail(Cause(FailureKind.ENGINE_INIT, EXPLICIT), rec, line_no)
        if header:
            return
        if s.outcome == "ready":
            # a served request can log an ERROR traceback and the server lives on: after readiness
            # only the engine's death or the process's exit count
            if p.ENGINE_DIED.search(rec.msg) or process_exit(rec.msg):
                self._fail(Cause(FailureKind.OTHER, EXIT), rec, line_no)
            return
        self._check_startup_line(rec, line_no)

    def _check_startup_line(self, rec: Record, line_no: int) -> None:
        """Before readiness: a failure rule's cause, else an engine's death, else a process exit."""
        s = self.startup
        cause = classify(rec, s.traceback_seen)
        if (
            cause is not None
            and cause.rank == EXPLICIT
            and s.first_exception is None
            and EXCEPTION_LINE.match(rec.msg)
        ):
            s.first_exception = (rec.text, line_no, rec.msg)  # the root cause `engine_init` points back to
        if cause is None:
            cause = _death_or_exit(rec.msg)
        if cause is not None:
            self._fail(cause, rec, line_no)

    def _read_frame(self, rec: Record, line_no: int) -> None:
        """A traceback frame tells how far startup had got; a frame inside the graph capture also
        shows the engine was not eager."""
        func = frame_of(rec.msg)
        phase = frame_phase(rec.msg) if func else None
        if phase is None or self.startup.outcome == "ready":
            return
        self.startup.frame_phase = (phase, rec.text, line_no)  # the innermost frame wins
        if func in CAPTURE_FRAMES:
            self.startup.infer("enforce_eager", False, rec.text, line_no)


def _death_or_exit(msg: str) -> Cause | None:
    """A line no failure rule names that still ends the startup: the engine died, or a process exited."""
    if p.ENGINE_DIED.search(msg):
        return Cause(FailureKind.ENGINE_INIT, ENGINE)
    if process_exit(msg):
        return Cause(FailureKind.OTHER, EXIT)
    return None
