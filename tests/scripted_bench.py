"""`launch bench` requests on a scripted clock: streamed replies whose every chunk time is given, turned
into records by the real parser (launcher/bench/record.py), so the bench's judges can be tested on
exact times."""

from __future__ import annotations

import itertools
import json

from launcher.bench.cells import RoundResult
from launcher.bench.exchange import Exchange, Phase, Tag
from launcher.bench.record import RequestRecord, build_record
from launcher.bench.server_metrics import MetricsDelta

WORDS = ("the", "river", "runs", "past", "an", "old", "mill", "and", "on", "towards", "a", "sea", "below",
         "our", "town")  # fmt: skip
ANSWERS = itertools.count()  # each scripted answer starts at another word: no two are the same text


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def usage_chunk(prompt: int, output: int) -> bytes:
    body = {
        "id": "chatcmpl-1",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": output},
    }
    return b"data: " + json.dumps(body).encode() + b"\n\ndata: [DONE]\n\n"


def request(
    start: float,
    *,
    tokens: int = 10,
    step_s: float = 0.01,
    first_s: float = 0.02,
    words: list[str] | None = None,
    usage: bool = True,
    concurrency: int = 4,
    round_: int = 1,
    finish: str = "stop",
    phase: Phase = Phase.TIMED,
    context: str = "short",
) -> RequestRecord:
    """One streamed reply on a scripted clock: the first token `first_s` after the send at `start`,
    then one token per `step_s`."""
    first = next(ANSWERS)
    text = words if words is not None else [WORDS[(first + i) % len(WORDS)] for i in range(tokens)]
    at = [start + first_s + k * step_s for k in range(tokens)]
    chunks = [
        (at[k], chunk({"content": (" " if k else "") + text[k]} if k < len(text) else {}))
        for k in range(tokens)
    ]
    last = at[-1] + 0.001
    chunks.append((last, chunk({}, finish)))
    chunks.append((last, usage_chunk(20, tokens) if usage else b"data: [DONE]\n\n"))
    tag = Tag(phase, context, concurrency, round_, 0)
    return build_record(Exchange(tag, f"r-{start}-{round_}", start, last, 200, tuple(chunks)))


def failed(start: float) -> RequestRecord:
    tag = Tag(Phase.TIMED, "short", 4, 1, 0)
    return build_record(Exchange(tag, "bad", start, start + 0.01, 500, (), error="HTTP 500: engine dead"))


def one_round(records: list[RequestRecord], index: int = 1, delta: MetricsDelta | None = None) -> RoundResult:
    wall = max(r.t_send + r.e2e_s for r in records) - min(r.t_send for r in records)
    return RoundResult(index, tuple(records), wall, delta or MetricsDelta())
