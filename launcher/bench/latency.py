"""A cell's latency and throughput under the names `vllm bench serve` prints, so they compare as-is.

Definitions follow vLLM 0.26.0 `vllm/benchmarks/serve.py` (`calculate_metrics`), over the
successful requests of all the cell's timed rounds:

    ttft   = first output event - send, per request
    tpot   = (e2e - ttft) / (output tokens - 1), per request with more than one output token
    itl    = every gap between consecutive output events, pooled over requests (per chunk: with
             spec decoding one chunk may carry several tokens, as in vLLM's own ITL)
    e2el   = last byte - send, per request
    output_throughput      = sum of output tokens / time
    total_token_throughput = sum of (prompt + output) tokens / time
    request_throughput     = completed requests / time

"time" is the sum of the rounds' wall times (first send to last byte). Statistics are in ms: mean,
std (population, as numpy's), median, p90, p99 (linear interpolation, as numpy's default).
An empty sample gives None, never 0 (vLLM prints 0.00 there, which reads as "instant").
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from launcher.bench.record import RequestRecord
from launcher.bench.stats import diffs, percentile

METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (90, 99)


def _samples_s(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in METRICS}
    for r in records:
        out["e2el"].append(r.e2e_s)
        out["itl"] += diffs(list(r.event_times))
        if r.ttft_s is None:
            continue
        out["ttft"].append(r.ttft_s)
        if (r.output_tokens or 0) > 1:
            out["tpot"].append((r.e2e_s - r.ttft_s) / ((r.output_tokens or 0) - 1))
    return out


def _stats_ms(name: str, values_s: Iterable[float]) -> dict[str, float | None]:
    values = [v * 1000.0 for v in values_s]
    out: dict[str, float | None] = {
        f"mean_{name}_ms": statistics.fmean(values) if values else None,
        f"std_{name}_ms": statistics.pstdev(values) if values else None,
        f"median_{name}_ms": percentile(values, 50),
    }
    for pct in PERCENTILES:
        out[f"p{pct}_{name}_ms"] = percentile(values, pct)
    return out


def _rate(amount: float, seconds: float, completed: int) -> float | None:
    return amount / seconds if seconds > 0 and completed else None


def vllm_bench_metrics(records: Sequence[RequestRecord], wall_s: float) -> dict[str, Any]:
    """The flat dict of `vllm bench serve` names for these requests, measured over `wall_s`."""
    ok = [r for r in records if r.ok]
    output = sum(r.output_tokens or 0 for r in ok)
    prompt = sum(r.prompt_tokens or 0 for r in ok)
    out: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": prompt,
        "total_output_tokens": output,
        "request_throughput": _rate(len(ok), wall_s, len(ok)),
        "output_throughput": _rate(output, wall_s, len(ok)),
        "total_token_throughput": _rate(prompt + output, wall_s, len(ok)),
    }
    for name, values in _samples_s(ok).items():
        out.update(_stats_ms(name, values))
    return out
