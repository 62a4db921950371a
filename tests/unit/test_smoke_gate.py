"""The smoke and health gates' verdicts (gates/smoke.py, gates/health.py) on a scripted server: which
answers pass, which fail and with what words, and what counts as "not yet". The server is the gates'
own HTTP interface (gates/context.py), answered by a table of replies; nothing runs."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from gates.chain import ChainRunner
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
    timeouts: list[float] = field(default_factory=list)  # of each chat request
    got: list[tuple[str, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        self.got.append((path, timeout_s))
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
            self.timeouts.append(timeout_s)
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


# ---- smoke on vLLM 0.26.0's recorded answers (the trained tiny-chat model, H200) ------------------
BODIES = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "h200-3" / "promotion" / "bodies"


def recorded_reply(name: str) -> Reply:
    """The reply vLLM gave to the request recorded on the first line of `bodies/NAME.json`."""
    return Reply(body=(BODIES / f"{name}.json").read_text(encoding="utf-8").partition("\n")[2])


def recorded_model(prompt: str) -> Reply:
    for name, asked in (
        ("smoke-arithmetic", "17 + 25"),
        ("smoke-chinese", "季节"),
        ("smoke-code", "add(a, b)"),
    ):
        if asked in prompt:
            return recorded_reply(name)
    assert "primary colours" in prompt, prompt
    return recorded_reply("smoke-colours")


def test_vllms_recorded_answers_pass_the_checks_they_answer() -> None:
    outcome = smoke(ChatServer(recorded_model), checks=["arithmetic", "chinese", "code", "consistency"])
    assert (outcome.verdict, outcome.summary) == (
        Verdict.PASS,
        "all 4 checks passed (arithmetic, chinese, code, consistency)",
    )


def test_one_answer_of_three_from_a_looping_model_breaks_the_consistency() -> None:
    answers = iter([recorded_reply("smoke-colours"), recorded_reply("loop"), recorded_reply("smoke-colours")])
    outcome = smoke(ChatServer(lambda prompt: next(answers)), checks=["consistency"])
    assert outcome.summary == "consistency: three answers at temperature 0 differ"


# ---- smoke's decisions across checks ---------------------------------------------------------------
def test_results_follow_the_tables_order_and_every_failure_is_named() -> None:
    outcome = smoke(ChatServer(lambda p: "nothing useful"), checks=["code", "arithmetic", "consistency"])
    assert list(outcome.evidence["results"]) == ["code", "arithmetic", "consistency"]
    assert outcome.summary == (
        "code: expected a def … return; got 'nothing useful'; arithmetic: expected 42; got 'nothing useful'"
    )
    assert outcome.evidence["results"]["consistency"] == "ok"


def test_an_error_among_the_three_answers_is_told_rather_than_a_difference() -> None:
    answers: Iterator[Reply | str] = iter(
        ["Red, yellow, blue.", Reply(502, body="Bad Gateway"), "Red, yellow, blue."]
    )
    outcome = smoke(ChatServer(lambda p: next(answers)), checks=["consistency"])
    assert outcome.summary == "consistency: HTTP 502: Bad Gateway"


def test_concurrency_stops_at_the_first_width_that_fails() -> None:
    server = ChatServer(lambda p: Reply(503, body="busy") if "1 to 4" in p else "1 2 3")
    outcome = smoke(server, checks=["concurrency"])
    assert outcome.summary == "concurrency: 1/2 concurrent requests failed: HTTP 503: busy"
    assert len(server.asked) == 2  # the 4-wide round was never sent


def test_each_request_carries_the_tables_budget_and_deadline() -> None:
    server = ChatServer()
    outcome = smoke(server, checks=["arithmetic", "code"], max_tokens=64, request_timeout_s=7)
    assert outcome.verdict is Verdict.PASS
    assert [b["max_tokens"] for b in server.asked] == [64, 64]
    assert server.timeouts == [7.0, 7.0]


def test_a_needle_for_an_unbounded_context_is_sized_as_asked() -> None:
    outcome = smoke(ChatServer(), max_model_len=None, needle_contexts=[1024], checks=["needle"])
    [tokens] = outcome.evidence["needle_tokens"]
    assert outcome.verdict is Verdict.PASS and 0.97 * 1024 <= tokens <= 1024


# ---- health on vLLM's recorded model list, and through the chain ----------------------------------
MODELS = (
    Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "eager" / "models.json"
).read_text(encoding="utf-8")


def test_health_on_the_recorded_model_list() -> None:
    recorded = HttpReply(200, MODELS)
    assert health(ChatServer(models=recorded), served=("tiny",)).summary == "/health 200; serving tiny"
    missing = health(ChatServer(models=recorded), served=("tiny", "tiny-lora"))
    assert (missing.verdict, missing.summary) == (
        Verdict.FAIL,
        "server serves ['tiny'], profile expects ['tiny', 'tiny-lora']",
    )
    assert missing.evidence == {"served": ["tiny"], "expected": ["tiny", "tiny-lora"]}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('{"object": "list", "data": [{"object": "model"}]}', "('id')"),
        ("<html>502 Bad Gateway</html>", "(Expecting value: line 1 column 1 (char 0))"),
        ('{"data": "tiny"}', "(string indices must be integers"),
    ],
)
def test_health_fails_a_model_list_of_another_shape_saying_why(body: str, why: str) -> None:
    outcome = health(ChatServer(models=HttpReply(200, body)))
    assert outcome.verdict is Verdict.FAIL
    assert outcome.summary.startswith(f"/v1/models body is not a model list {why}"), outcome.summary
    assert outcome.evidence == {"body": body}


def test_health_asks_both_routes_with_its_own_deadline() -> None:
    server = ChatServer()
    clock = FakeClock()
    ctx = replace(make_context(ScriptedLog(clock), clock, Expectations(("qwen3-8b",), None)), http=server)
    assert HealthGate({"request_timeout_s": 2.5}).check(ctx).verdict is Verdict.PASS
    assert server.got == [("/health", 2.5), ("/v1/models", 2.5)]


@dataclass
class StartingServer(ChatServer):
    """Not listening until `listening_at`, then /health 503 until `ready_at` (fake seconds)."""

    clock: FakeClock = field(default_factory=FakeClock)
    listening_at: float = 3.0
    ready_at: float = 6.0

    def get(self, path: str, timeout_s: float) -> HttpReply:
        since = self.clock.now - 1000.0
        if path == "/health" and since < self.listening_at:
            return HttpReply(0, "", "[Errno 111] Connection refused")
        if path == "/health" and since < self.ready_at:
            return HttpReply(503, "")
        return super().get(path, timeout_s)


def test_health_waits_through_refused_and_503_until_the_server_is_ready() -> None:
    clock = FakeClock()
    server = StartingServer(clock=clock)
    ctx = replace(make_context(ScriptedLog(clock), clock, Expectations(("qwen3-8b",), None)), http=server)
    result = ChainRunner([HealthGate({"poll_s": 1.0})]).run(ctx).results[0]
    assert (result.verdict, result.duration_s) == (Verdict.PASS, 6.0)
    never = StartingServer(clock=clock, ready_at=float("inf"))
    late = (
        ChainRunner([HealthGate({"poll_s": 1.0, "timeout_s": 10})]).run(replace(ctx, http=never)).results[0]
    )
    assert (late.verdict, late.summary) == (Verdict.FAIL, "deadline 10s passed: /health answered 503")
