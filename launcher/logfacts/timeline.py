"""Where a start's seconds went: vLLM's own lines cut one startup into contiguous phases.

Each milestone is the time of the first line that ends a phase (vllm-facts.md §2, §4); a phase runs
from the previous milestone the log shows to its own, so the phases always add up to the startup's
span (its first line to `Starting vLLM server`, `startup_seconds`) and a phase the log skips (no
torch.compile with --enforce-eager, no capture) is folded into the next one. vLLM's stamps carry
whole seconds and no year (§1): a phase is as exact as that, and its own lines' figures (`Loading
weights took 3.1 seconds`) are kept beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# (milestone, phase it ends, what the operator reads), in log order
PHASES: tuple[tuple[str, str, str], ...] = (
    ("loading", "startup", "the engine core: its imports, CUDA and engine init"),
    ("weights", "weights", "weights loaded"),
    ("compiled", "compile", "torch.compile"),
    ("kv", "kv_profiling", "memory profiling, KV cache sized"),
    ("graphs", "graphs", "CUDA graph capture"),
    ("engine", "warmup", "engine warm-up"),
    ("serving", "api_server", "API server up"),
)
CACHE_HIT, CACHE_MISS = "hit", "miss"


@dataclass(slots=True)
class Stamps:
    """What one startup's lines said about its phases, as they were read."""

    at: dict[str, str] = field(default_factory=dict)  # milestone -> `MM-DD HH:MM:SS` of its first line
    last: str | None = None  # the latest stamp read: where an unstamped line (uvicorn's) happened
    cache_dir: str | None = None
    compiled_graphs: int = 0  # `Compiling a graph for compile range …`: a cache miss
    loaded_graphs: int = 0  # `Directly load the compiled graph(s) …`: a cache hit

    def mark(self, milestone: str, ts: str | None) -> None:
        if ts is not None:
            self.at.setdefault(milestone, ts)

    def cache(self) -> str | None:
        """A startup that compiled any graph missed the cache; one that only loaded them hit it."""
        if self.compiled_graphs:
            return CACHE_MISS
        return CACHE_HIT if self.loaded_graphs else None


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    label: str
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)


def phases(stamps: Stamps, details: dict[str, dict[str, Any]]) -> list[Phase]:
    """The contiguous phases from the first line to the server's start; empty until it started."""
    first = stamps.at.get("first")
    if first is None or "serving" not in stamps.at:
        return []
    out: list[Phase] = []
    previous = first
    for milestone, name, label in PHASES:
        ts = stamps.at.get(milestone)
        seconds = seconds_between(previous, ts)
        if ts is None or seconds is None or seconds < 0:
            continue  # not in this log (eager: no compile, no capture): the next phase takes its time
        out.append(
            Phase(name, label, seconds, {k: v for k, v in details.get(name, {}).items() if v is not None})
        )
        previous = ts
    return out


def gb_per_s(gib: float | None, seconds: float | None) -> float | None:
    """Decimal GB/s, as disks are rated; None where either figure is missing or zero."""
    if not gib or not seconds:
        return None
    return round(gib * 2**30 / 1e9 / seconds, 2)


def seconds_between(start: str | None, end: str | None) -> float | None:
    """vLLM timestamps are `MM-DD HH:MM:SS` local time without a year (vllm-facts.md §1): a leap year
    parses 02-29, and an end before the start is taken to cross New Year (into 2001: adding 365 days
    to a date of leap year 2000 stopped a day short, and a start over New Year came out negative)."""
    if start is None or end is None:
        return None
    try:
        a = datetime.strptime("2000-" + start, "%Y-%m-%d %H:%M:%S")
        b = datetime.strptime("2000-" + end, "%Y-%m-%d %H:%M:%S")
        if b < a:
            b = b.replace(year=2001)  # ValueError for 02-29: no year after a leap year has one
    except ValueError:
        return None
    return (b - a).total_seconds()
