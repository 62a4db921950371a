"""CUDA-graph capture as the log shows it, keeping V2's throwaway profiling capture apart.

vllm-facts.md §3.4: V2's memory profiler runs a real capture *before* the KV cache exists (all
PIECEWISE graphs, 2 FULL ones) and prints bars and a `Graph capturing finished` line of its own.
Only the capture after the `KV cache size` line (older: `# GPU blocks`, or the concurrency line
alone) and before `init engine` counts. Bars come from one rank only (the global first rank); when
older releases prefixed and showed them per rank, the first rank seen is the one counted. An
excerpt that begins after the KV line shows only the final capture: `settled` says so at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

# `Capturing CUDA graphs (PIECEWISE)`, V1 `(mixed prefill-decode, PIECEWISE)` / `(decode, FULL)`
_MODE_OF_BAR = re.compile(r"^Capturing CUDA graphs \((?:[^)]*, )?(?P<mode>PIECEWISE|FULL)\)$")


@dataclass(slots=True)
class Bar:
    desc: str
    n: int
    total: int


@dataclass(slots=True)
class CaptureTracker:
    kv_sized: bool = False
    engine_initialized: bool = False
    profiling_bars: dict[str, Bar] = field(default_factory=dict)
    final_bars: dict[str, Bar] = field(default_factory=dict)
    final_proc: str | None = None
    final_done: tuple[float, float | None] | None = None  # (secs, GiB) of the final capture
    done_line: str | None = None
    profiling_done: tuple[float, float | None, str] | None = None  # a finish line before any KV line
    mode_counts: dict[str, int] | None = None  # V1 `Profiling CUDA graph memory: PIECEWISE=51 ...`
    skipped: bool = False

    def on_bar(self, desc: str, n: int, total: int, proc: str | None) -> str | None:
        """Record one bar redraw; returns "final", "profiling", or None when it changed nothing."""
        if self.engine_initialized:
            return None
        if not self.kv_sized:
            return "profiling" if _update(self.profiling_bars, desc, n, total) else None
        if self.final_bars and proc != self.final_proc:
            return None  # another rank's copy of the same bars (older prefixed stderr)
        self.final_proc = proc
        return "final" if _update(self.final_bars, desc, n, total) else None

    def on_done(self, secs: float, gib: float | None, line: str) -> bool:
        """`Graph capturing finished`: True when it is the final capture's (first one after KV)."""
        if not self.kv_sized:
            self.profiling_done = self.profiling_done or (secs, gib, line)
            return False
        if self.final_done is not None or self.engine_initialized:
            return False
        self.final_done = (secs, gib)
        self.done_line = line
        return True

    def settled(self, excerpt: bool) -> CaptureTracker:
        """The final capture, once the log has ended. When no KV line came and the log is an excerpt
        that began after it (`excerpt`), what was taken for a profiling pass was the final capture; a
        complete log, V1's printed profile (`mode_counts`) or a KV memory line keeps it a profiling pass."""
        seen = bool(self.profiling_bars or self.profiling_done)
        if self.kv_sized or not excerpt or self.mode_counts or not seen:
            return self
        done = self.profiling_done
        return replace(
            self,
            kv_sized=True,
            profiling_bars={},
            final_bars=dict(self.profiling_bars),
            final_done=done[:2] if done else None,
            done_line=done[2] if done else None,
            profiling_done=None,
        )

    def captured(self) -> int | None:
        if self.final_bars:
            return sum(bar.n for bar in self.final_bars.values())
        if self.final_done is not None and self.mode_counts:
            return sum(self.mode_counts.values())
        return None

    def captured_by_mode(self) -> dict[str, int] | None:
        """Final graphs per runtime mode, from bars that name one; else V1's printed counts once the
        capture finished."""
        counts: dict[str, int] = {}
        for bar in self.final_bars.values():
            m = _MODE_OF_BAR.match(bar.desc)
            if m is not None:
                counts[m.group("mode")] = counts.get(m.group("mode"), 0) + bar.n
        if counts:
            return counts
        if self.final_done is not None and self.mode_counts:
            return dict(self.mode_counts)
        return None

    def expected(self) -> int | None:
        if self.mode_counts:
            return sum(self.mode_counts.values())
        if self.final_bars:
            return sum(bar.total for bar in self.final_bars.values())
        return None

    def profiling_graphs(self) -> int | None:
        return sum(bar.n for bar in self.profiling_bars.values()) if self.profiling_bars else None


def _update(bars: dict[str, Bar], desc: str, n: int, total: int) -> bool:
    bar = bars.get(desc)
    if bar is None:
        bars[desc] = Bar(desc, n, total)
        return True
    if (bar.n, bar.total) == (n, total):
        return False
    bar.n, bar.total = n, total
    return True
