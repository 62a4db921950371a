"""The token plan of one request: what each output token is and which channel it shows up in.

Everything the model will say is decided up front (deterministically); the scheduler only decides
*when* each token comes out. Hidden tokens (`</think>`, `<tool_call>`, the EOS) count in usage but
produce no visible text, as in vLLM.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum

from vllm_sim import tokenizer
from vllm_sim.answers import Answer, continuation
from vllm_sim.toolcalls import PlannedCall


class Channel(StrEnum):
    REASONING = "reasoning"
    CONTENT = "content"
    TOOL_NAME = "tool_name"
    TOOL_ARGS = "tool_args"
    HIDDEN = "hidden"


@dataclass(frozen=True, slots=True)
class Tok:
    text: str
    channel: Channel
    call: int = -1


@dataclass(frozen=True, slots=True)
class Plan:
    tokens: tuple[Tok, ...]
    finish_reason: str
    stop_reason: str | None
    calls: tuple[PlannedCall, ...]

    @property
    def reasoning_tokens(self) -> int:
        return sum(1 for t in self.tokens if t.channel == Channel.REASONING)


def _call_tokens(calls: list[PlannedCall]) -> list[Tok]:
    out: list[Tok] = []
    for i, call in enumerate(calls):
        out.append(Tok("<tool_call>", Channel.HIDDEN, i))
        out.append(Tok(call.name, Channel.TOOL_NAME, i))
        out += [Tok(p, Channel.TOOL_ARGS, i) for p in tokenizer.pieces(call.arguments)]
        out.append(Tok("</tool_call>", Channel.HIDDEN, i))
    return out


def _reasoning_tokens(reasoning: str) -> list[Tok]:
    """The thinking, closed by `</think>` (which shows nothing); none without reasoning."""
    if not reasoning:
        return []
    return [
        *(Tok(p, Channel.REASONING) for p in tokenizer.pieces(reasoning)),
        Tok("</think>", Channel.HIDDEN),
    ]


def _content_tokens(text: str) -> list[Tok]:
    return [Tok(p, Channel.CONTENT) for p in tokenizer.pieces(text)]


def _cut_at_stop(content: str, stop: list[str]) -> tuple[str, str | None]:
    """The content up to a stop string it holds, and that string (vLLM's `stop_reason`)."""
    stop_reason: str | None = None
    for s in stop:
        if s and s in content:
            content, stop_reason = content[: content.index(s)], s
    return content, stop_reason


def build_plan(
    answer: Answer,
    calls: list[PlannedCall],
    *,
    max_tokens: int,
    min_tokens: int,
    ignore_eos: bool,
    stop: list[str],
    rng: random.Random,
    lang: str,
    named_call: bool,
) -> Plan:
    content, stop_reason = _cut_at_stop(answer.content, stop)
    body = _reasoning_tokens(answer.reasoning) + (_call_tokens(calls) if calls else _content_tokens(content))
    want = max_tokens if ignore_eos else max(min_tokens, len(body))
    while len(body) < min(want, max_tokens) and not calls:
        body += _content_tokens(continuation(rng, lang))
    if len(body) >= max_tokens:  # no room left for the EOS token
        return Plan(tuple(body[:max_tokens]), "length", None, tuple(calls))
    body.append(Tok("", Channel.HIDDEN))  # the EOS token: counted, not shown
    finish = ("stop" if named_call else "tool_calls") if calls else "stop"
    return Plan(tuple(body), finish, stop_reason, tuple(calls))


# What a model with garbage in its weights or its KV cache writes: fragments with no meaning.
GARBAGE = (
    " ность",
    "ologi",
    "}}",
    " _",
    "中",
    " qu",
    "\u2581",
    "##",
    " 7",
    "ensk",
    " тал",
    ")]",
    " rog",
    "ए",
)


def garbled(plan: Plan, seed: int) -> Plan:
    """The same number of tokens, all visible nonsense: no tool calls, no reasoning, no natural end
    unless the plan had one (then the EOS stays last)."""
    rng = random.Random(seed)
    natural_end = plan.finish_reason != "length"
    count = len(plan.tokens) - (1 if natural_end else 0)
    body = [Tok(rng.choice(GARBAGE), Channel.CONTENT) for _ in range(max(1, count))]
    if not natural_end:
        return Plan(tuple(body[: len(plan.tokens)]), "length", None, ())
    return Plan((*body, Tok("", Channel.HIDDEN)), "stop", None, ())


def cut_short(plan: Plan, emitted: int, reason: str) -> Plan:
    """The plan of a request the engine ended early (`abort`, `error`): what came out, and why."""
    return Plan(plan.tokens[:emitted], reason, None, ())
