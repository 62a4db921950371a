"""The facts that follow from other facts: CUDA graphs, the failure's fields, the KV pool.

Each rule is a pure function of what one startup read, so each decision has its own unit test
(tests/unit/test_logfacts_derive.py). A fact derived here rather than read from a line of its own
is named in `LogFacts.inferred` with the line it follows from (docs/logs.md lists which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.logfacts.capture import CaptureTracker
from launcher.logfacts.facts import CaptureBar, Concurrency
from launcher.logfacts.failure import ARGUMENT_KINDS, Cause, argument_of


@dataclass(frozen=True, slots=True)
class Graphs:
    """What the log shows of CUDA graphs for one startup."""

    captured: bool | None
    count: int | None
    expected: int | None
    by_mode: dict[str, int] | None


def no_graphs(enforce_eager: Any, cudagraph_mode: Any, capture_skipped: bool) -> bool:
    """Eager mode, mode NONE or a skipped capture: this startup captures no graph at all."""
    return enforce_eager is True or cudagraph_mode == "NONE" or capture_skipped


def graphs(cap: CaptureTracker, none_expected: bool, failed: bool) -> Graphs:
    """Captured when the final capture finished; not captured when none were to be, or startup failed
    first; unknown while a capture may still come (the log was cut)."""
    finished = cap.final_done is not None
    if finished:
        captured: bool | None = True
    elif none_expected or failed:
        captured = False
    else:
        captured = None
    count, expected = cap.captured(), cap.expected()
    by_mode = cap.captured_by_mode()
    if none_expected and not finished:
        count, expected, by_mode = count or 0, expected or 0, by_mode or {}
    return Graphs(captured, count, expected, by_mode)


def capture_fields(cap: CaptureTracker) -> dict[str, Any]:
    done = cap.final_done
    return {
        "capture_bars": [CaptureBar(b.desc, b.n, b.total) for b in cap.final_bars.values()],
        "profiling_graphs": cap.profiling_graphs(),
        "cudagraph_profile": dict(cap.mode_counts) if cap.mode_counts else None,
        "capture_seconds": done[0] if done else None,
        "capture_gib": done[1] if done else None,
        "capture_line": cap.done_line,
    }


def kv_fields(
    tokens: list[int], concurrency: list[tuple[float, int]], gib: list[float], blocks: list[int]
) -> dict[str, Any]:
    """Per-rank KV lines: the pool is the smallest rank's (the engine can use no more than it)."""
    conc = min(concurrency, default=None)
    return {
        "kv_cache_gib": min(gib, default=None),
        "kv_cache_tokens": min(tokens, default=None),
        "kv_cache_tokens_per_rank": list(tokens) or None,
        "max_concurrency": Concurrency(conc[0], conc[1]) if conc else None,
        "max_concurrency_per_rank": [c for c, _ in concurrency] or None,
        "gpu_blocks": min(blocks, default=None),
    }


@dataclass(frozen=True, slots=True)
class FailureRead:
    """A startup's failure as the collector kept it: the cause, the line that proves it (for
    `engine_init`, the root cause printed before it), who printed it and how far startup had got."""

    cause: Cause
    line: str
    line_no: int
    message: str
    proc: str | None
    phase: str | None


def failure_fields(failure: FailureRead | None) -> dict[str, Any]:
    if failure is None:
        return dict.fromkeys(_FAILURE_KEYS)
    kind = failure.cause.kind
    return {
        "failure_kind": str(kind),
        "failure_line": failure.line,
        "failure_line_no": failure.line_no,
        "failure_message": failure.message.strip(),
        "failure_proc": failure.proc,
        "failure_phase": failure.phase,
        "failure_argument": argument_of(failure.message) if kind in ARGUMENT_KINDS else None,
    }


_FAILURE_KEYS = (
    "failure_kind",
    "failure_line",
    "failure_line_no",
    "failure_message",
    "failure_proc",
    "failure_phase",
    "failure_argument",
)
