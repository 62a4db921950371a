"""canary: one short real generation through the served model answers within its deadline.

`/health` asks only whether vLLM's engine has errored: an engine core that is stopped, deadlocked
in a kernel or stuck in a collective still answers 200 while every request waits (SIGSTOP of
`VLLM::EngineCore` on vLLM 0.26.0, H200: `/health` 200 in 1-2 ms, a completion got nothing in
10 s). A generation with a deadline is the signal to trust. `/v1/completions` needs no chat
template, so it works for base and chat models alike; greedy and a few tokens keep it cheap.

The same request and judge serve the gate (`launch check --live`, a start's chain) and the serving
watch after promotion (launcher/watch/), so there is one canary, never a copy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from basis.clock import SYSTEM_CLOCK, Clock
from basis.setting import Setting
from gates.base import GateBase, Need
from gates.context import GateContext, HttpClient
from gates.outcome import Outcome

PROMPT = "The capital of France is"
MAX_TOKENS = 4


class Answer(StrEnum):
    OK = "ok"
    TIMEOUT = "timeout"  # no answer within the deadline: hung, or queued behind a full batch
    ERROR = "error"  # an answer, but an error status or a body that is no completion
    REFUSED = "refused"  # no connection at all (not listening, reset)


@dataclass(frozen=True, slots=True)
class CanaryAnswer:
    answer: Answer
    status: int
    seconds: float
    detail: str

    @property
    def ok(self) -> bool:
        return self.answer is Answer.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": str(self.answer),
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
        }


def canary_request(model: str) -> dict[str, Any]:
    return {"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0}


def send_canary(http: HttpClient, model: str, timeout_s: float, clock: Clock = SYSTEM_CLOCK) -> CanaryAnswer:
    """POST one short completion; never raises (the HTTP client reports network errors as 0)."""
    started = clock.monotonic()
    reply = http.post_json("/v1/completions", canary_request(model), timeout_s)
    seconds = clock.monotonic() - started
    if reply.status == 0:
        if reply.timed_out:
            return CanaryAnswer(Answer.TIMEOUT, 0, seconds, f"no answer within {timeout_s:g} s")
        return CanaryAnswer(Answer.REFUSED, 0, seconds, f"no connection: {reply.error}")
    return judge_completion(reply.status, reply.body, seconds)


def judge_completion(status: int, body: str, seconds: float) -> CanaryAnswer:
    """A completion is healthy when it is HTTP 200 with a choice that carries text and tokens."""
    if status != 200:
        return CanaryAnswer(Answer.ERROR, status, seconds, f"HTTP {status}: {_excerpt(body)}")
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        text = choice["text"]
        tokens = (data.get("usage") or {}).get("completion_tokens")
    except (ValueError, KeyError, IndexError, TypeError):
        return CanaryAnswer(Answer.ERROR, status, seconds, f"not a completion: {_excerpt(body)}")
    if not isinstance(text, str) or (isinstance(tokens, int) and tokens < 1):
        return CanaryAnswer(Answer.ERROR, status, seconds, "a completion without a generated token")
    return CanaryAnswer(Answer.OK, status, seconds, f"{tokens if tokens is not None else '?'} tokens")


def _excerpt(body: str, limit: int = 300) -> str:
    text = " ".join(body.split())
    return text if len(text) <= limit else text[:limit] + "…"


class CanaryGate(GateBase):
    name = "canary"
    NEEDS: ClassVar[frozenset[Need]] = frozenset({Need.HTTP})
    DEFAULT_TIMEOUT_S = 60.0
    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "request_timeout_s",
            (int, float),
            10.0,
            "Deadline of the one short generation.",
            unit="s",
            minimum=0.1,
            maximum=600,
        ),
    )

    def check(self, ctx: GateContext) -> Outcome:
        model = ctx.expect.served_model_names[0] if ctx.expect.served_model_names else None
        if model is None:
            return Outcome.failed("the profile names no served model: the canary has nothing to ask")
        result = send_canary(ctx.http, model, float(self.setting("request_timeout_s")), ctx.clock)
        evidence = result.to_json()
        if result.answer is Answer.REFUSED:
            return Outcome.not_yet(f"canary: {result.detail}", **evidence)
        if not result.ok:
            return Outcome.failed(f"canary on model {model}: {result.detail}", **evidence)
        return Outcome.passed(f"canary answered in {result.seconds:.2f} s on model {model}", **evidence)
