"""The trap detectors: pure rules from measured values to findings, each citing its evidence.

A finding never changes a number; it says why a number should not be trusted as it stands.
Thresholds are named constants so docs/bench.md and the tests can state them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from launcher.bench.server_metrics import MetricsDelta, MetricsSnapshot
from launcher.bench.stats import median

CHK_QUEUED = 1.5  # chk above this: wall time went to queueing, not decoding
COLD_MAX_HIT = 0.05  # a cold phase may hit at most 5 % of its prompt tokens
DEGENERATE_SHARE = 0.25  # a cell is degenerate when a quarter of its answers are
REASONING_MIN_TOKENS = 1024
ROUND1_TTFT_FACTOR = 1.5
ROUND1_TTFT_MIN_S = 0.02
ROUND1_DECODE_FACTOR = 0.8
# Warm-up is what a server has served, not how long it has run (the field note's cold 0.43 s was the
# first run after a restart): a server that served requests is not flagged past its first two
# minutes, when the gates' own requests have just gone through (10 min flagged every run of a
# server restarted five minutes before, long warm).
FRESH_UPTIME_S = 120.0
SPREAD_WARN = 0.15
OTHER_TRAFFIC_SLACK = 1.05


class Flag(StrEnum):
    QUEUED = "queued"
    COLD_NOT_COLD = "cold-not-cold"
    COLD_UNPROVEN = "cold-unproven"
    NESTED_PREFIX = "nested-prefix"
    SAME_SEQUENCE = "same-sequence"
    DEGENERATE = "degenerate"
    EMPTY_ANSWERS = "empty-answers"
    SMALL_MAX_TOKENS = "small-max-tokens"
    ROUND1_SLOW = "round1-slow"
    FRESH_SERVER = "fresh-server"
    ROUNDS_DISAGREE = "rounds-disagree"
    ERRORS = "errors"
    NO_USAGE = "no-usage"
    OTHER_TRAFFIC = "other-traffic"


@dataclass(frozen=True, slots=True)
class Finding:
    flag: Flag
    message: str

    def as_json(self) -> dict[str, str]:
        return {"flag": str(self.flag), "message": self.message}


def chk(decode_per_user: float | None, concurrency: int, total_tok_s: float | None) -> float | None:
    """decode_per_user x concurrency / total throughput: ~1 when decoding, >> 1 when queueing."""
    if not decode_per_user or not total_tok_s:
        return None
    return decode_per_user * concurrency / total_tok_s


def queued(value: float | None, concurrency: int) -> Finding | None:
    if value is None or value <= CHK_QUEUED or concurrency < 2:
        return None
    return Finding(
        Flag.QUEUED,
        f"chk {value:.2f} at c{concurrency}: only about 1/{value:.1f} of the wall time was decoding; the "
        "rest was queueing (max-num-seqs, KV space), prefill, or slots idle after short answers ended the "
        "round early; per-user decode x users overstates throughput",
    )


def cold_proof(delta: MetricsDelta, requests: int) -> tuple[Finding | None, str]:
    """(finding, the sentence that proves or disproves that the cold phase was cold)."""
    if delta.prefix_queries is None or delta.prefix_hits is None:
        msg = "cold not proven: /metrics has no prefix-cache counters (--disable-log-stats, or not vLLM)"
        return Finding(Flag.COLD_UNPROVEN, msg), msg
    hits, queries = int(delta.prefix_hits), int(delta.prefix_queries)
    if queries <= 0:
        msg = f"cold not measured: none of the {requests} cold request(s) reached the prefix cache (failed?)"
        return Finding(Flag.COLD_UNPROVEN, msg), msg
    rate = delta.hit_rate or 0.0
    msg = f"{hits} of {queries} prompt tokens of {requests} cold request(s) hit the prefix cache ({rate:.1%})"
    if rate > COLD_MAX_HIT:
        return Finding(
            Flag.COLD_NOT_COLD, f"cold was not cold: {msg}; a nested or repeated prefix was cached"
        ), msg
    return None, f"cold proven: {msg}"


def same_sequence(signatures: Sequence[tuple[str, str]], answers: Sequence[str]) -> Finding | None:
    """Copies of one deterministic request (same prompt, greedy or one seed), or identical answers."""
    n = len(signatures)
    if n < 2:
        return None
    if len(set(signatures)) == 1:
        return Finding(
            Flag.SAME_SEQUENCE,
            f"one sequence printed {n} times: all {n} requests are the same "
            "prompt with the same sampling; acceptance and prefix hits describe one sequence",
        )
    filled = [a for a in answers if a]
    if len(filled) >= 2 and len(set(filled)) == 1:
        return Finding(
            Flag.SAME_SEQUENCE,
            f"all {len(filled)} answers are identical text: one sequence printed {len(filled)} times",
        )
    return None


def degenerate(scores: Sequence[float | None], flagged: int) -> Finding | None:
    scored = [s for s in scores if s is not None]
    if not scored or flagged / len(scored) < DEGENERATE_SHARE:
        return None
    low = min(scored)
    return Finding(
        Flag.DEGENERATE,
        f"{flagged}/{len(scored)} answers degenerate (distinct-trigram ratio as low "
        f"as {low:.2f}); degenerate text decodes faster, so tok/s is inflated",
    )


def empty_answers(finish_reasons: Sequence[str | None], total: int, reasoning: bool) -> Finding | None:
    """Answers with neither text nor a tool call, by why they ended (their finish_reason): a budget
    spent (`length`) wants a larger max_tokens; a model that ended its turn (`stop`) after its
    reasoning will not answer with more budget. On the H200, tiny-chat-think's 94 of 128 empty
    answers all ended with `stop` (docs/real-vllm.md, issue 22): blaming max_tokens would be wrong."""
    if not finish_reasons:
        return None
    spent = sum(1 for f in finish_reasons if f == "length")
    ended = Counter(f or "none" for f in finish_reasons if f != "length")
    after = " after reasoning" if reasoning else ""
    why = [f"{spent} spent all of max_tokens{' on reasoning' if reasoning else ''}"] if spent else []
    why += [f"{n} ended ({reason}) with no answer{after}" for reason, n in sorted(ended.items())]
    return Finding(Flag.EMPTY_ANSWERS, f"{len(finish_reasons)}/{total} answers empty: {'; '.join(why)}")


def small_max_tokens(reasoning: bool, max_tokens: int) -> Finding | None:
    if not reasoning or max_tokens >= REASONING_MIN_TOKENS:
        return None
    return Finding(
        Flag.SMALL_MAX_TOKENS,
        f"reasoning model with max_tokens {max_tokens} < {REASONING_MIN_TOKENS}: "
        "thinking can take the whole budget and leave blank answers; use --max-tokens 1024 or more",
    )


def round1_slow(ttft: Sequence[float | None], decode: Sequence[float | None]) -> Finding | None:
    """Round 1 an outlier against rounds 2..n: the server (or its caches) was not warm yet."""
    if len(ttft) < 3:
        return None
    rest_ttft, rest_decode = median(ttft[1:]), median(decode[1:])
    first_ttft, first_decode = ttft[0], decode[0]
    if (
        first_ttft is not None
        and rest_ttft is not None
        and first_ttft > rest_ttft * ROUND1_TTFT_FACTOR
        and first_ttft - rest_ttft > ROUND1_TTFT_MIN_S
    ):
        return Finding(
            Flag.ROUND1_SLOW,
            f"round 1 TTFT {first_ttft:.3f}s vs {rest_ttft:.3f}s in later rounds: "
            "not warm (e.g. first run after a restart); repeat the run before deciding",
        )
    if first_decode and rest_decode and first_decode < rest_decode * ROUND1_DECODE_FACTOR:
        return Finding(
            Flag.ROUND1_SLOW,
            f"round 1 decode {first_decode:.1f} tok/s vs {rest_decode:.1f} later: "
            "not warm; repeat the run before deciding",
        )
    return None


def fresh_server(before: MetricsSnapshot) -> Finding | None:
    uptime, served = before.uptime_s, before.requests_served
    if served is not None and served < 1:
        return Finding(
            Flag.FRESH_SERVER,
            f"the server had served no request before this run (up "
            f"{_age(uptime)}): first run after a restart is not warm; run twice, keep the second",
        )
    if uptime is not None and uptime < FRESH_UPTIME_S:
        return Finding(
            Flag.FRESH_SERVER,
            f"the server started {_age(uptime)} ago: first runs after a "
            "restart are not warm; run twice, keep the second",
        )
    return None


def rounds_disagree(name: str, value: float | None) -> Finding | None:
    if value is None or value <= SPREAD_WARN:
        return None
    return Finding(Flag.ROUNDS_DISAGREE, f"{name} differs by {value:.0%} between rounds: noisy, add --rounds")


def errors(failed: int, total: int, example: str | None) -> Finding | None:
    if not failed:
        return None
    return Finding(
        Flag.ERRORS, f"{failed}/{total} requests failed" + (f", e.g. {example}" if example else "")
    )


def no_usage(missing: int, total: int) -> Finding | None:
    if not missing:
        return None
    return Finding(
        Flag.NO_USAGE,
        f"{missing}/{total} streams had no usage chunk: their token counts are event "
        "counts, not tokens (the server ignored stream_options.include_usage)",
    )


def other_traffic(delta: MetricsDelta, our_tokens: int) -> Finding | None:
    server = delta.generation_tokens
    if server is None or server <= our_tokens * OTHER_TRAFFIC_SLACK + 16:
        return None
    return Finding(
        Flag.OTHER_TRAFFIC,
        f"the server generated {int(server)} tokens while we received {our_tokens}: "
        "other clients shared the server, so hit rate and acceptance include their traffic",
    )


def _age(seconds: float | None) -> str:
    return "unknown time" if seconds is None else f"{seconds:.0f}s"
