"""One startup's mutable state, and its freeze into `LogFacts` (the derived rules live here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from launcher.logfacts.capture import CaptureTracker
from launcher.logfacts.events import EventKind
from launcher.logfacts.facts import CaptureBar, Concurrency, LineRef, LogFacts, MarkerHit, StartupSummary
from launcher.logfacts.failure import Cause, FailureKind
from launcher.logfacts.history import History
from launcher.logfacts.lines import Record


@dataclass(slots=True)
class Startup:
    marker_patterns: tuple[str, ...]
    values: dict[str, Any] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    non_default_args: dict[str, Any] | None = None
    kv_tokens: list[int] = field(default_factory=list)
    concurrency: list[tuple[float, int]] = field(default_factory=list)
    kv_gib: list[float] = field(default_factory=list)
    weights_gib: list[float] = field(default_factory=list)
    gpu_blocks: list[int] = field(default_factory=list)
    capture: CaptureTracker = field(default_factory=CaptureTracker)
    shards: tuple[int, int] | None = None
    v1_engine: bool = False
    outcome: str | None = None
    failure: tuple[Cause, str, int, str] | None = None  # cause, line, line number, message
    failure_proc: str | None = None  # which process wrote the failure line (`VllmWorker rank=3`)
    failure_phase: str | None = None  # loading / profiling / capture, when the log shows it
    first_exception: tuple[str, int, str] | None = None  # first uncaught exception line after a traceback
    died_after_ready: tuple[str, int] | None = None
    shutdown_seen: bool = False
    traceback_seen: bool = False
    banner_line_no: int | None = None
    banner_ts: str | None = None  # timestamps of the lines that bound `startup_seconds`
    init_ts: str | None = None
    serving_ts: str | None = None
    markers: dict[int, tuple[str, int]] = field(default_factory=dict)
    emitted: set[EventKind] = field(default_factory=set)  # kinds `once()` has emitted
    seen: set[EventKind] = field(default_factory=set)  # every kind emitted
    activity: bool = False

    def set(self, key: str, value: Any, rank: int) -> None:
        """Keep the value from the highest-ranked source; equal ranks: the later line wins."""
        if rank >= self.ranks.get(key, 0):
            self.values[key] = value
            self.ranks[key] = rank
            self.activity = True

    def phase(self) -> str | None:
        """How far startup got, from the events seen: a failure then happened in that phase."""
        seen = self.seen
        if self.capture.kv_sized or EventKind.CAPTURING_GRAPHS in seen:
            return "capture"
        if EventKind.WEIGHTS_LOADED in seen or EventKind.PROFILING in seen:
            return "profiling"
        if EventKind.LOADING_WEIGHTS in seen:
            return "loading"
        return None

    def cause_line(self) -> tuple[str, int, str] | None:
        """The failure's line; for `engine_init` the startup's first uncaught exception (`logger.exception`
        prints it after the generic line), the root cause `See root cause above.` points back to."""
        if self.failure is None:
            return None
        cause, line, line_no, msg = self.failure
        first = self.first_exception
        if cause.kind == FailureKind.ENGINE_INIT and first is not None:
            return first
        return line, line_no, msg

    def mark(self, index: int, line: str, line_no: int, emit: Callable[..., None]) -> None:
        if index not in self.markers:
            self.markers[index] = (line, line_no)
            record = Record(line, line)
            emit(EventKind.MARKER_SEEN, record, line_no, pattern=self.marker_patterns[index])

    def summary(self) -> StartupSummary | None:
        """This startup in short; None when nothing of it was read."""
        if not self.activity:
            return None
        f = self.failure
        return StartupSummary(
            self.banner_line_no,
            self.values.get("vllm_version"),
            self.outcome,
            str(f[0].kind) if f else None,
            f[2] if f else None,
        )

    def freeze(self, startups_seen: int, lines_read: int, history: History, cut: tuple[int, int]) -> LogFacts:
        v = self.values
        cap = self.capture
        eager = v.get("enforce_eager")
        no_graphs = eager is True or cap.skipped or v.get("cudagraph_mode") == "NONE"
        if cap.final_done is not None:
            captured: bool | None = True
        elif no_graphs or self.outcome == "failed":
            captured = False
        else:
            captured = None
        graphs = cap.captured()
        expected = cap.expected()
        if no_graphs and cap.final_done is None:
            graphs, expected = graphs or 0, expected or 0
        conc = min(self.concurrency, default=None)
        failure = self.failure
        cause = self.cause_line()
        startups, outcomes = history.with_current(self.summary())
        return LogFacts(
            **{k: v.get(k) for k in _PLAIN},
            non_default_args=self.non_default_args,
            weights_gib=max(self.weights_gib, default=None),
            kv_cache_gib=min(self.kv_gib, default=None),
            kv_cache_tokens=min(self.kv_tokens, default=None),
            kv_cache_tokens_per_rank=list(self.kv_tokens) or None,
            max_concurrency=Concurrency(conc[0], conc[1]) if conc else None,
            max_concurrency_per_rank=[c for c, _ in self.concurrency] or None,
            gpu_blocks=min(self.gpu_blocks, default=None),
            cudagraph_captured=captured,
            graphs_captured=graphs,
            graphs_expected=expected,
            graphs_captured_by_mode=cap.captured_by_mode() or ({} if no_graphs else None),
            capture_bars=[CaptureBar(b.desc, b.n, b.total) for b in cap.final_bars.values()],
            profiling_graphs=cap.profiling_graphs(),
            cudagraph_profile=dict(cap.mode_counts) if cap.mode_counts else None,
            capture_seconds=cap.final_done[0] if cap.final_done else None,
            capture_gib=cap.final_done[1] if cap.final_done else None,
            capture_line=cap.done_line,
            startup_seconds=_seconds_between(self.banner_ts, self.serving_ts or self.init_ts)
            if self.outcome == "ready"
            else None,
            outcome=self.outcome,
            failure_kind=str(failure[0].kind) if failure else None,
            failure_line=cause[0] if cause else None,
            failure_line_no=cause[1] if cause else None,
            failure_message=cause[2].strip() if cause else None,
            failure_proc=self.failure_proc if failure else None,
            failure_phase=self.failure_phase if failure else None,
            died_after_ready=LineRef(*self.died_after_ready) if self.died_after_ready else None,
            shutdown_seen=self.shutdown_seen,
            markers=[_marker(pattern, self.markers.get(i)) for i, pattern in enumerate(self.marker_patterns)],
            startups_seen=startups_seen,
            startups=startups,
            startup_outcomes=outcomes,
            lines_read=lines_read,
            lines_cut=cut[0],
            chars_cut=cut[1],
        )


_PLAIN = (
    "vllm_version",
    "model",
    "served_model_name",
    "served_url",
    "served_port",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "quantization",
    "speculative_config",
    "tool_call_parser",
    "weights_load_seconds",
    "model_runner",
    "enforce_eager",
    "cudagraph_mode",
    "capture_sizes",
    "max_capture_size",
    "compile_seconds",
    "engine_init_seconds",
)


def _marker(pattern: str, hit: tuple[str, int] | None) -> MarkerHit:
    return MarkerHit(pattern, True, hit[0], hit[1]) if hit else MarkerHit(pattern, False)


def _seconds_between(start: str | None, end: str | None) -> float | None:
    """vLLM timestamps are `MM-DD HH:MM:SS` local time without a year (vllm-facts.md §1): a leap year
    parses 02-29, and an end before the start is taken to cross New Year."""
    if start is None or end is None:
        return None
    try:
        a = datetime.strptime("2000-" + start, "%Y-%m-%d %H:%M:%S")
        b = datetime.strptime("2000-" + end, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    if b < a:
        b += timedelta(days=365)
    return (b - a).total_seconds()
