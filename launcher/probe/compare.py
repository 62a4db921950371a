"""Arms against arm 0, from the bench summaries of their runs: pure functions, no I/O.

Per arm and metric: the value is the median of the runs used; the run-to-run spread is
(max - min) / median over those runs (launcher.bench.stats.spread). A delta to arm 0 is noise when
it is inside the larger of both arms' spreads (run-to-run, and round-to-round within each run).
The first run after a restart is detected with the bench's own round-1 rule, one level up: run 1's
TTFT above 1.5 x (and 20 ms over) the later runs', or its decode below 0.8 x. Such a run is left
out of the values (the field notes' 0.43 s vs 0.16 s cold TTFT); runs that still disagree by more
than 15 % flag the arm.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from launcher.bench.checks import ROUND1_DECODE_FACTOR, ROUND1_TTFT_FACTOR, ROUND1_TTFT_MIN_S, SPREAD_WARN
from launcher.bench.stats import median, spread

IGNORED_BENCH_FLAGS = frozenset({"fresh-server"})  # every restarted arm is fresh: the probe handles it


class Better(StrEnum):
    HIGHER = "higher"
    LOWER = "lower"


class Verdict(StrEnum):
    NOISE = "noise"
    BETTER = "better"
    WORSE = "worse"
    UNKNOWN = "n/a"


class FlagKind(StrEnum):
    WARMUP = "warm-up"
    DISAGREE = "runs-disagree"
    SINGLE_RUN = "single-run"


@dataclass(frozen=True, slots=True)
class MetricInfo:
    label: str
    unit: str
    better: Better


METRICS: dict[str, MetricInfo] = {
    "cold_ttft_s": MetricInfo("TTFT cold", "s", Better.LOWER),
    "ttft_s": MetricInfo("TTFT warm", "s", Better.LOWER),
    "decode_tok_s": MetricInfo("decode tok/s", "tok/s", Better.HIGHER),
    "total_tok_s": MetricInfo("output tok/s", "tok/s", Better.HIGHER),
}


@dataclass(frozen=True, slots=True, order=True)
class MetricKey:
    context: str
    concurrency: int  # 0 for the per-context cold TTFT
    metric: str

    @property
    def info(self) -> MetricInfo:
        return METRICS[self.metric]

    @property
    def cell(self) -> str:
        return self.context if self.concurrency == 0 else f"{self.context} c{self.concurrency}"

    @property
    def label(self) -> str:
        return f"{self.cell} {self.info.label}"


@dataclass(frozen=True, slots=True)
class Sample:
    value: float | None
    round_spread: float | None


@dataclass(frozen=True, slots=True)
class Flag:
    kind: FlagKind
    message: str


@dataclass(frozen=True, slots=True)
class Stat:
    runs: tuple[float | None, ...]  # every run, in order
    used: tuple[int, ...]  # 1-based runs the value is made of
    value: float | None
    run_spread: float | None
    round_spread: float | None

    @property
    def noise(self) -> float | None:
        spreads = [s for s in (self.run_spread, self.round_spread) if s is not None]
        return max(spreads) if spreads else None


@dataclass(frozen=True, slots=True)
class Delta:
    relative: float | None
    band: float | None
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class ArmResult:
    name: str
    stats: dict[MetricKey, Stat]
    deltas: dict[MetricKey, Delta] = field(default_factory=dict)
    flags: tuple[Flag, ...] = ()
    bench_flags: tuple[str, ...] = ()

    @property
    def unsettled(self) -> bool:
        return any(f.kind is FlagKind.DISAGREE for f in self.flags)

    def outside_noise(self) -> list[tuple[MetricKey, Delta]]:
        return [
            (k, d) for k, d in sorted(self.deltas.items()) if d.verdict in (Verdict.BETTER, Verdict.WORSE)
        ]


def samples(summary: dict[str, Any]) -> dict[MetricKey, Sample]:
    """The metrics of one bench run (its summary JSON)."""
    out: dict[MetricKey, Sample] = {}
    for ctx in summary.get("contexts") or []:
        out[MetricKey(str(ctx["context"]), 0, "cold_ttft_s")] = Sample(
            ctx.get("cold_ttft_s"), ctx.get("spread")
        )
    for cell in summary.get("cells") or []:
        spreads = cell.get("spread") or {}
        for metric in ("ttft_s", "decode_tok_s", "total_tok_s"):
            key = MetricKey(str(cell["context"]), int(cell["concurrency"]), metric)
            out[key] = Sample(cell.get(metric), spreads.get(metric))
    return out


def bench_flags(summaries: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """Every trap the bench flagged in any run of the arm (cells, contexts, run level)."""
    found: set[str] = set()
    for summary in summaries:
        entries = [*summary.get("cells", []), *summary.get("contexts", []), summary]
        for entry in entries:
            found.update(str(f["flag"]) for f in entry.get("flags", []) if isinstance(f, dict))
    return tuple(sorted(found - IGNORED_BENCH_FLAGS))


def warmup_effect(runs: Sequence[dict[MetricKey, Sample]]) -> Flag | None:
    """Run 1 an outlier against runs 2..n on TTFT or decode: the server was not warm yet."""
    if len(runs) < 2:
        return None
    for key in sorted(runs[0]):
        first = runs[0][key].value
        rest = median(r[key].value for r in runs[1:] if key in r)
        if first is None or rest is None:
            continue
        if key.metric in ("cold_ttft_s", "ttft_s"):
            if first > rest * ROUND1_TTFT_FACTOR and first - rest > ROUND1_TTFT_MIN_S:
                return Flag(FlagKind.WARMUP, f"run 1 {key.label} {first:.3f} s vs {rest:.3f} s in later runs")
        elif key.metric == "decode_tok_s" and first < rest * ROUND1_DECODE_FACTOR:
            return Flag(FlagKind.WARMUP, f"run 1 {key.label} {first:.1f} vs {rest:.1f} in later runs")
    return None


def arm_stats(summaries: Sequence[dict[str, Any]]) -> tuple[dict[MetricKey, Stat], tuple[Flag, ...]]:
    runs = [samples(s) for s in summaries]
    used, flags = _runs_used(runs)
    if len(runs) == 1:
        flags.append(Flag(FlagKind.SINGLE_RUN, "one run: no run-to-run spread, only round-to-round"))
    stats = {key: _stat(runs, key, used) for key in sorted({k for r in runs for k in r})}
    disagree = _disagreement(stats)
    if disagree:
        flags.append(Flag(FlagKind.DISAGREE, "runs disagree: " + "; ".join(disagree) + "; add --runs"))
    return stats, tuple(flags)


def _runs_used(runs: list[dict[MetricKey, Sample]]) -> tuple[list[int], list[Flag]]:
    """The runs (numbered from 1) the values use: all, or all but a first run that was not warm."""
    used = list(range(1, len(runs) + 1))
    warm = warmup_effect(runs)
    if warm is None:
        return used, []
    used = used[1:]
    kept = (
        f"runs {used[0]}-{used[-1]} only"
        if len(used) > 1
        else f"run {used[0]} only (add --runs 3 to keep a spread)"
    )
    message = f"{warm.message}: the first run after the start was not warm; values use {kept}"
    return used, [Flag(FlagKind.WARMUP, message)]


def _stat(runs: list[dict[MetricKey, Sample]], key: MetricKey, used: list[int]) -> Stat:
    """One metric over the runs: every run's value, and the median and spread of those used."""
    values = tuple(r[key].value if key in r else None for r in runs)
    chosen = [values[i - 1] for i in used]
    rounds = [runs[i - 1][key].round_spread for i in used if key in runs[i - 1]]
    clean_rounds = [r for r in rounds if r is not None]
    return Stat(
        values, tuple(used), median(chosen), spread(chosen), max(clean_rounds) if clean_rounds else None
    )


def _disagreement(stats: dict[MetricKey, Stat]) -> list[str]:
    out = []
    for key, stat in sorted(stats.items()):
        if stat.run_spread is None or stat.run_spread <= SPREAD_WARN:
            continue
        chosen = [v for v in (stat.runs[i - 1] for i in stat.used) if v is not None]
        if key.info.unit == "s" and chosen and max(chosen) - min(chosen) <= ROUND1_TTFT_MIN_S:
            continue  # a few ms apart on a tiny TTFT is not a disagreement
        out.append(f"{key.label} {stat.run_spread:.0%} apart")
    return out


def delta(arm: Stat, base: Stat, better: Better) -> Delta:
    if arm.value is None or base.value is None or base.value == 0:
        return Delta(None, None, Verdict.UNKNOWN)
    relative = (arm.value - base.value) / abs(base.value)
    bands = [b for b in (arm.noise, base.noise) if b is not None]
    band = max(bands) if bands else None
    if band is None:
        return Delta(relative, None, Verdict.UNKNOWN)
    if abs(relative) <= band:
        return Delta(relative, band, Verdict.NOISE)
    improved = relative > 0 if better is Better.HIGHER else relative < 0
    return Delta(relative, band, Verdict.BETTER if improved else Verdict.WORSE)


def compare(arms: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> list[ArmResult]:
    """`arms[0]` is production; an arm with no summaries (rejected, failed) gets no numbers."""
    results: list[ArmResult] = []
    base: dict[MetricKey, Stat] = {}
    for index, (name, summaries) in enumerate(arms):
        stats, flags = arm_stats(summaries) if summaries else ({}, ())
        if index == 0:
            base = stats
        deltas = {k: delta(s, base[k], k.info.better) for k, s in stats.items() if index > 0 and k in base}
        results.append(ArmResult(name, stats, deltas, flags, bench_flags(summaries)))
    return results
