"""One cell of the matrix (a context at a concurrency): its rounds and what they add up to.

Per round: total throughput = sum of usage output tokens / round wall time (first send to last
byte); TTFT, TTFC, ITL and per-user decode are medians over the round's requests. The cell value
is the median of its rounds, and the spread (max - min) / median is kept beside it. Prefix-cache
hit rate and spec-decode acceptance come from the /metrics deltas summed over the rounds.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import reduce
from typing import Any

from launcher.bench import checks
from launcher.bench.checks import Finding
from launcher.bench.latency import vllm_bench_metrics
from launcher.bench.record import RequestRecord
from launcher.bench.server_metrics import MetricsDelta
from launcher.bench.stats import median, spread


@dataclass(frozen=True, slots=True)
class RoundResult:
    index: int
    records: tuple[RequestRecord, ...]
    wall_s: float
    delta: MetricsDelta

    @property
    def ok(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens or 0 for r in self.ok)

    @property
    def total_tok_s(self) -> float | None:
        return self.output_tokens / self.wall_s if self.wall_s > 0 and self.ok else None

    def med(self, name: str) -> float | None:
        return median(getattr(r, name) for r in self.ok)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


@dataclass(frozen=True, slots=True)
class CellSummary:
    context: str
    concurrency: int
    rounds: tuple[RoundResult, ...]
    findings: tuple[Finding, ...]

    @property
    def records(self) -> list[RequestRecord]:
        return [r for rnd in self.rounds for r in rnd.records]

    def per_round(self, name: str) -> list[float | None]:
        if name == "total_tok_s":
            return [r.total_tok_s for r in self.rounds]
        return [r.med(name) for r in self.rounds]

    def value(self, name: str) -> float | None:
        return median(self.per_round(name))

    @property
    def delta(self) -> MetricsDelta:
        return reduce(MetricsDelta.plus, (r.delta for r in self.rounds))

    @property
    def chk(self) -> float | None:
        return checks.chk(self.value("decode_tok_s"), self.concurrency, self.value("total_tok_s"))

    @property
    def empty(self) -> int:
        return sum(1 for r in self.records if r.empty_answer)

    @property
    def think_share(self) -> float | None:
        ok = [r for r in self.records if r.ok]
        total = sum(r.output_tokens or 0 for r in ok)
        return sum(r.reasoning_tokens for r in ok) / total if total else None

    def as_json(self) -> dict[str, Any]:
        ok = [r for r in self.records if r.ok]
        return {
            "context": self.context,
            "concurrency": self.concurrency,
            "requests": len(self.records),
            "rounds": len(self.rounds),
            "ttft_s": self.value("ttft_s"),
            "ttfc_s": self.value("ttfc_s"),
            "itl_median_ms": _ms(self.value("itl_median_s")),
            "itl_p90_ms": _ms(self.value("itl_p90_s")),
            "decode_tok_s": self.value("decode_tok_s"),
            "total_tok_s": self.value("total_tok_s"),
            "chk": self.chk,
            "e2e_s": self.value("e2e_s"),
            "prefix_hit_rate": self.delta.hit_rate,
            "spec_acceptance": self.delta.acceptance,
            "empty_answers": self.empty,
            "errors": sum(1 for r in self.records if not r.ok),
            "think_share": self.think_share,
            "answer_score_median": median(r.content_score for r in ok),
            "reasoning_score_median": median(r.reasoning_score for r in ok),
            "degenerate_answers": sum(1 for r in ok if r.degenerate),
            "finish_reasons": dict(Counter(r.finish_reason or "none" for r in ok)),
            "spread": {k: spread(self.per_round(k)) for k in ("ttft_s", "decode_tok_s", "total_tok_s")},
            "per_round": [
                {
                    "round": r.index,
                    "wall_s": r.wall_s,
                    "output_tokens": r.output_tokens,
                    "total_tok_s": r.total_tok_s,
                    "ttft_s": r.med("ttft_s"),
                    "decode_tok_s": r.med("decode_tok_s"),
                    "prefix_hit_rate": r.delta.hit_rate,
                    "spec_acceptance": r.delta.acceptance,
                }
                for r in self.rounds
            ],
            "flags": [f.as_json() for f in self.findings],
            **self.vllm_bench,
        }

    @property
    def vllm_bench(self) -> dict[str, Any]:
        """mean/median/p90/p99 of TTFT, TPOT, ITL, E2EL in ms and tok/s, named as `vllm bench serve`."""
        return vllm_bench_metrics(self.records, sum(r.wall_s for r in self.rounds))


def judge(
    context: str,
    concurrency: int,
    rounds: tuple[RoundResult, ...],
    *,
    signatures: list[tuple[str, str]],
    reasoning: bool,
) -> CellSummary:
    """Summarize a cell and attach every finding its numbers support."""
    draft = CellSummary(context, concurrency, rounds, ())
    records = draft.records
    ok = [r for r in records if r.ok]
    found: list[Finding | None] = [
        checks.queued(draft.chk, concurrency),
        checks.same_sequence(signatures, [r.content for r in ok]),
        checks.degenerate([r.content_score for r in ok], sum(1 for r in ok if r.degenerate)),
        checks.round1_slow(draft.per_round("ttft_s"), draft.per_round("decode_tok_s")),
        checks.rounds_disagree("output throughput", spread(draft.per_round("total_tok_s"))),
        checks.errors(
            len(records) - len(ok), len(records), next((r.error for r in records if not r.ok), None)
        ),
        checks.no_usage(sum(1 for r in ok if not r.tokens_from_usage), len(ok)),
        checks.other_traffic(draft.delta, sum(r.output_tokens or 0 for r in ok)),
        checks.empty_answers([r.finish_reason for r in records if r.empty_answer], len(ok), reasoning),
    ]
    return CellSummary(context, concurrency, rounds, tuple(f for f in found if f is not None))
