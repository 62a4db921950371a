"""The smoke and health gates' verdicts (gates/smoke.py, gates/health.py) on a scripted server: which
answers pass, which fail and with what words, and what counts as "not yet". The server is the gates'
own HTTP interface (gates/context.py), answered by a table of replies; nothing runs."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from gates.context import Expectations, HttpReply
from gates.health import HealthGate
from gates.needle import ESTIMATED
from gates.outcome import Verdict
from gates.smoke import CHECKS, Answer, SmokeGate
from tests.doubles import FakeClock, ScriptedLog, make_context

Respond = Callable[[str], "Reply | str"]


@dataclass(frozen=True, slots=True)
class Reply:
    status: int = 200
    content: str = ""
    finish_reason: str = "stop"
    reasoning: str = ""
    body: str | None = None  # a raw body instead of a chat completion


def good_model(prompt: str) -> str:
    """What a working model answers to each smoke prompt."""
    if "17 + 25" in prompt:
        return "42"
    if "季节" in prompt:
        return "一年有四个季节。"
    if "def" in prompt or "Python function" in prompt:
        return "def add(a, b):\n    return a + b"
    if "secret code" in prompt:
        return re.search(r"The secret code is (\S+)\.", prompt).group(1)  # type: ignore[union-attr]
    if "primary colours" in prompt:
        return "Red, yellow and blue."
    return "1 2 3 4"


@dataclass
class ChatServer:
    """`/v1/models`, `/v1/chat/completions` (answered by `respond`) and `/tokenize` (a token a word)."""

    respond: Respond = good_model
    served: tuple[str, ...] = ("qwen3-8b",)
    health: HttpReply = HttpReply(200, "")
    models: HttpReply | None = None
    tokenize: bool = True
    asked: list[Mapping[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        if path == "/health":
            return self.health
        assert path == "/v1/models", path
        cards = [{"id": name, "object": "model"} for name in self.served]
        return self.models or HttpReply(200, json.dumps({"object": "list", "data": cards}))

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        prompt = body["messages"][-1]["content"]
        if path == "/tokenize":
            if not self.tokenize:
                return HttpReply(404, '{"detail":"Not Found"}')
            return HttpReply(200, json.dumps({"count": len(prompt.split()) + 9, "max_model_len": 8192}))
        assert path == "/v1/chat/completions", path
        with self.lock:  # the concurrency check asks from several threads
            self.asked.append(body)
        reply = self.respond(prompt)
        reply = reply if isinstance(reply, Reply) else Reply(content=reply)
        if reply.body is not None or reply.status != 200:
            return HttpReply(reply.status, reply.body or "")
        message = {"role": "assistant", "content": reply.content, "reasoning": reply.reasoning or None}
        choice = {"index": 0, "message": message, "finish_reason": reply.finish_reason}
        return HttpReply(200, json.dumps({"id": "c", "choices": [choice]}))

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        raise AssertionError(path)


def smoke(server: ChatServer, max_model_len: int | None = 32768, **table: Any) -> Any:
    clock = FakeClock()
    expect = Expectations(("qwen3-8b",), None, max_model_len=max_model_len)
    return SmokeGate(table).check(replace(make_context(ScriptedLog(clock), clock, expect), http=server))


def test_a_working_model_passes_every_check_and_says_which() -> None:
    server = ChatServer()
    outcome = smoke(server)
    assert outcome.verdict is Verdict.PASS
    assert outcome.summary == f"all 6 checks passed ({', '.join(CHECKS)})"
    assert outcome.evidence["results"] == {check: "ok" for check in CHECKS}
    assert outcome.evidence["needle_tokens"] and outcome.evidence["needle_tokens"][0] <= 8192
    assert {b["model"] for b in server.asked} == {"qwen3-8b"}, "the first served model, from /v1/models"
    assert len(server.asked) == 4 + 3 + 2 + 4  # one each, three alike, then 2 and 4 at once
    assert all(b["temperature"] == 0.0 for b in server.asked)


@pytest.mark.parametrize(
    ("check", "wrong", "said"),
    [
        ("arithmetic", "41", "expected 42; got '41'"),
        (
            "chinese",
            "There are four seasons.",
            "expected an answer in Chinese; got 'There are four seasons.'",
        ),
        ("code", "add = lambda a, b: a + b", "expected a def … return"),
    ],
)
def test_a_wrong_answer_fails_its_check_quoting_it(check: str, wrong: str, said: str) -> None:
    outcome = smoke(ChatServer(lambda p: wrong), checks=[check])
    assert outcome.verdict is Verdict.FAIL and outcome.summary.startswith(f"{check}: {said}")


def test_an_empty_answer_and_a_reasoning_model_out_of_budget_are_told_apart() -> None:
    empty = smoke(ChatServer(lambda p: Reply(content="  ")), checks=["arithmetic"])
    assert empty.summary == "arithmetic: empty answer"
    thinking = Reply(content="", finish_reason="length", reasoning="Let me think about 17 and 25...")
    out_of_budget = smoke(ChatServer(lambda p: thinking), checks=["arithmetic"])
    assert out_of_budget.summary == "arithmetic: reasoning used the whole budget: empty answer"


def test_an_http_error_is_quoted_and_no_connection_is_named() -> None:
    error = Reply(500, body='{"error": {"message": "EngineCore died", "code": 500}}')
    outcome = smoke(ChatServer(lambda p: error), checks=["arithmetic"])
    assert outcome.summary == 'arithmetic: HTTP 500: {"error": {"message": "EngineCore died", "code": 500}}'
    assert Answer(0, "", None, "").problem() == "HTTP no connection"


def test_three_answers_at_temperature_zero_must_agree() -> None:
    answers = iter(["Red, yellow, blue.", "Red, yellow, blue.", "Red, green, blue."])
    outcome = smoke(ChatServer(lambda p: next(answers)), checks=["consistency"])
    assert outcome.summary == "consistency: three answers at temperature 0 differ"


def test_concurrent_requests_that_fail_are_counted_per_width() -> None:
    calls = iter(range(100))

    def flaky(prompt: str) -> Reply | str:
        return (
            Reply(503, body="busy") if next(calls) >= 3 else "1 2 3"
        )  # the 2-wide pair passes, 4-wide fails

    outcome = smoke(ChatServer(flaky), checks=["concurrency"])
    assert outcome.summary == "concurrency: 3/4 concurrent requests failed: HTTP 503: busy"


def test_the_needle_must_be_found_and_fits_the_context_it_is_given() -> None:
    server = ChatServer(lambda p: "I do not know.")
    outcome = smoke(server, needle_contexts=[2048], checks=["needle"])
    assert outcome.verdict is Verdict.FAIL
    assert re.fullmatch(r"needle: expected ZX-2048-Q at \d+ tokens; got 'I do not know.'", outcome.summary)
    found = smoke(ChatServer(), needle_contexts=[2048, 4096], checks=["needle"])
    assert found.verdict is Verdict.PASS and len(found.evidence["needle_tokens"]) == 2
    assert all(0.97 * 2048 <= n <= 2048 for n in found.evidence["needle_tokens"][:1])


def test_a_needle_larger_than_the_model_is_capped_to_leave_room_for_the_answer() -> None:
    server = ChatServer()
    outcome = smoke(server, max_model_len=4096, needle_contexts=[32768], checks=["needle"])
    assert outcome.verdict is Verdict.PASS
    [tokens] = outcome.evidence["needle_tokens"]
    assert tokens <= 4096 - 256
    assert server.asked[-1]["max_tokens"] <= 4096 - tokens, "the answer's budget fits what is left"


def test_a_context_too_small_for_any_needle_says_to_drop_the_check() -> None:
    outcome = smoke(ChatServer(), max_model_len=300, checks=["needle"])
    assert outcome.summary == "needle: max_model_len 300 leaves no room for a needle: remove the needle check"


def test_without_tokenize_the_needle_is_estimated_and_the_summary_says_so() -> None:
    outcome = smoke(ChatServer(tokenize=False), needle_contexts=[1024], checks=["needle"])
    assert outcome.verdict is Verdict.PASS and outcome.summary.endswith(f"; {ESTIMATED}")
    assert outcome.evidence["notes"] == [ESTIMATED]


def test_a_server_without_a_model_list_is_not_ready_yet() -> None:
    outcome = smoke(ChatServer(models=HttpReply(0, "", "connection refused")))
    assert outcome.verdict is Verdict.NOT_YET and outcome.summary == "/v1/models answered connection refused"


def test_no_check_selected_is_a_failure_not_a_pass() -> None:
    outcome = smoke(ChatServer(), checks=[])
    assert outcome.verdict is Verdict.FAIL and "would check nothing" in outcome.summary


def health(server: ChatServer, served: tuple[str, ...] = ("qwen3-8b",)) -> Any:
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock), clock, Expectations(served, None))
    return HealthGate({}).check(replace(ctx, http=server))


def test_health_passes_when_the_profiles_names_are_served() -> None:
    outcome = health(ChatServer(served=("qwen3-8b", "lora-a")))
    assert outcome.verdict is Verdict.PASS and outcome.summary == "/health 200; serving qwen3-8b, lora-a"


def test_health_waits_while_the_server_is_not_listening_or_not_healthy() -> None:
    refused = health(ChatServer(health=HttpReply(0, "", "ConnectionRefusedError")))
    assert (refused.verdict, refused.summary) == (
        Verdict.NOT_YET,
        "/health: no answer yet (ConnectionRefusedError)",
    )
    starting = health(ChatServer(health=HttpReply(503, "loading")))
    assert (starting.verdict, starting.evidence["body"]) == (Verdict.NOT_YET, "loading")


def test_health_fails_on_another_model_or_a_broken_model_list() -> None:
    other = health(ChatServer(served=("llama",)))
    assert other.verdict is Verdict.FAIL
    assert other.summary == "server serves ['llama'], profile expects ['qwen3-8b']"
    broken = health(ChatServer(models=HttpReply(200, '{"object": "list"}')))
    assert broken.verdict is Verdict.FAIL and broken.summary.startswith("/v1/models body is not a model list")
    down = health(ChatServer(models=HttpReply(500, "Internal Server Error")))
    assert (down.verdict, down.summary) == (Verdict.FAIL, "/v1/models answered 500")
