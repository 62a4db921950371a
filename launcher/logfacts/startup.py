"""One startup's mutable state, and its freeze into `LogFacts` (the derived rules: `derive.py`).

A fact can be stated by several lines; each source has a rank and a lower rank never overwrites a
higher one: what vLLM built (engine config line, explicit log lines) beats what it was asked (args)
beats what follows from other lines (`infer`: graphs were captured, so not eager) beats a command
line echoed by a shell or a unit. An inferred value keeps the line it was inferred from until a
line that states the fact replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from launcher.logfacts import derive
from launcher.logfacts.capture import CaptureTracker
from launcher.logfacts.events import EventKind
from launcher.logfacts.facts import LineRef, LogFacts, MarkerHit, StartupSummary
from launcher.logfacts.failure import Cause, FailureKind
from launcher.logfacts.history import History
from launcher.logfacts.lines import Record
from launcher.logfacts.timeline import Phase, Stamps, gb_per_s, phases, seconds_between

COMMAND, INFERRED, ASKED, STATED = 1, 2, 3, 4


@dataclass(slots=True)
class Startup:
    marker_patterns: tuple[str, ...]
    values: dict[str, Any] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)
    inferred: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> the line it follows from
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
    failure_phase: str | None = None  # loading / profiling / capture, when the log's events show it
    frame_phase: tuple[str, str, int] | None = None  # phase, line, line number from a traceback frame
    first_exception: tuple[str, int, str] | None = None  # first uncaught exception line after a traceback
    died_after_ready: tuple[str, int] | None = None
    shutdown_seen: bool = False
    traceback_seen: bool = False
    banner_line_no: int | None = None
    banner_ts: str | None = None  # timestamps of the lines that bound `startup_seconds`
    init_ts: str | None = None
    serving_ts: str | None = None
    stamps: Stamps = field(default_factory=Stamps)  # where each phase ended (timeline.py)
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
            if rank != INFERRED:
                self.inferred.pop(key, None)

    def infer(self, key: str, value: Any, line: str, line_no: int) -> None:
        """A fact that follows from this line rather than being stated by it; the first such line is kept."""
        if self.ranks.get(key, 0) <= INFERRED:
            self.set(key, value, INFERRED)
            self.inferred.setdefault(key, (line, line_no))

    def phase(self) -> str | None:
        """How far startup got, from the events seen: a failure then happened in that phase. In an
        excerpt that began after the KV line, a capture already seen was the final one."""
        seen = self.seen
        if self.capture.kv_sized or EventKind.CAPTURING_GRAPHS in seen:
            return "capture"
        if self.is_excerpt() and (self.capture.profiling_done or self.capture.profiling_bars):
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
        startups, outcomes = history.with_current(self.summary())
        plain: dict[str, Any] = {k: self.values.get(k) for k in _PLAIN}
        return LogFacts(
            **plain,
            non_default_args=self.non_default_args,
            weights_gib=max(self.weights_gib, default=None),
            **derive.kv_fields(self.kv_tokens, self.concurrency, self.kv_gib, self.gpu_blocks),
            **self._graph_fields(),
            startup_seconds=self._startup_seconds(),
            compile_cache=self.stamps.cache(),
            compile_cache_dir=self.stamps.cache_dir,
            timeline=self._timeline(),
            outcome=self.outcome,
            **derive.failure_fields(self._failure_read()),
            died_after_ready=LineRef(*self.died_after_ready) if self.died_after_ready else None,
            shutdown_seen=self.shutdown_seen,
            markers=[_marker(pattern, self.markers.get(i)) for i, pattern in enumerate(self.marker_patterns)],
            startups_seen=startups_seen,
            startups=startups,
            startup_outcomes=outcomes,
            inferred={key: LineRef(*ref) for key, ref in sorted(self._inferred().items())},
            lines_read=lines_read,
            lines_cut=cut[0],
            chars_cut=cut[1],
        )

    # ---- the steps of `freeze` -----------------------------------------------------------------------
    def settled_capture(self) -> CaptureTracker:
        """The capture as the whole log shows it: in an excerpt that begins after the KV line (no banner,
        no KV memory, no V2 runner stated), the capture seen is the final one (derive.py's rules)."""
        return self.capture.settled(self.is_excerpt())

    def is_excerpt(self) -> bool:
        """The log began after this startup's banner, and shows neither V2's runner nor a KV memory line
        (which would come after V2's profiling capture): a capture seen before any KV line is final."""
        return self.banner_line_no is None and not self.kv_gib and self.values.get("model_runner") != "v2"

    def _graph_fields(self) -> dict[str, Any]:
        cap = self.settled_capture()
        v = self.values
        none_expected = derive.no_graphs(v.get("enforce_eager"), v.get("cudagraph_mode"), cap.skipped)
        g = derive.graphs(cap, none_expected, self.outcome == "failed")
        return {
            "cudagraph_captured": g.captured,
            "graphs_captured": g.count,
            "graphs_expected": g.expected,
            "graphs_captured_by_mode": g.by_mode,
            **derive.capture_fields(cap),
        }

    def _failure_read(self) -> derive.FailureRead | None:
        cause = self.cause_line()
        if self.failure is None or cause is None:
            return None
        phase = self.failure_phase or (self.frame_phase[0] if self.frame_phase else None)
        return derive.FailureRead(self.failure[0], cause[0], cause[1], cause[2], self.failure_proc, phase)

    def _inferred(self) -> dict[str, tuple[str, int]]:
        """Inferred values that no stated line replaced; the failure's phase when only a traceback frame
        showed it."""
        out = {k: ref for k, ref in self.inferred.items() if self.ranks.get(k) == INFERRED}
        if self.failure is not None and self.failure_phase is None and self.frame_phase is not None:
            out["failure_phase"] = self.frame_phase[1:]
        return out

    def _startup_seconds(self) -> float | None:
        if self.outcome != "ready":
            return None
        return seconds_between(self.banner_ts, self.serving_ts or self.init_ts)

    def _timeline(self) -> list[Phase]:
        """The ready startup's phases, each with the figures its own lines state."""
        if self.outcome != "ready":
            return []
        v, cap = self.values, self.settled_capture()
        gib = max(self.weights_gib, default=None)
        done = cap.final_done
        details: dict[str, dict[str, Any]] = {
            "weights": {
                "gib": gib,
                "load_seconds": v.get("weights_load_seconds"),
                "gb_per_s": gb_per_s(gib, v.get("weights_load_seconds")),
            },
            "compile": {
                "seconds": v.get("compile_seconds"),
                "cache": self.stamps.cache(),
                "cache_dir": self.stamps.cache_dir,
            },
            "kv_profiling": {"kv_cache_gib": min(self.kv_gib, default=None)},
            "graphs": {"count": cap.captured(), "seconds": done[0] if done else None},
        }
        return phases(self.stamps, details)


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
