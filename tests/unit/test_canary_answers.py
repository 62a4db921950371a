"""The canary's judgement (`gates/canary.py`) and what the serving watch makes of it and of `/health`
(`launcher/watch/probes.py`): on vLLM 0.26.0's recorded replies, and on the replies a server that is
gone, late or wrong gives. The HTTP seam is a small scripted client that records what it was asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from gates.canary import MAX_TOKENS, PROMPT, Answer, CanaryAnswer, CanaryGate, judge_completion, send_canary
from gates.chain import ChainRunner
from gates.context import Expectations, HttpReply
from gates.outcome import Verdict
from gates.tool_cases import CaseResult
from launcher.watch import probes
from launcher.watch.verdict import Check, Kind
from tests.doubles import FakeClock, ScriptedLog, make_context

RECORDED = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "eager"


@dataclass
class ScriptedHttp:
    """Answers every POST with `reply`; keeps what was posted."""

    reply: HttpReply
    posted: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        raise AssertionError("the canary only posts")

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        self.posted.append((path, dict(body), timeout_s))
        return self.reply

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        raise AssertionError("the canary only posts")


def recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


# ---- the judge -----------------------------------------------------------------------------------
def test_the_recorded_completion_counts_its_generated_tokens() -> None:
    answer = judge_completion(200, recorded("completions.json"), 0.05)
    assert (answer.answer, answer.status, answer.detail) == (Answer.OK, 200, "8 tokens")


def test_an_error_status_is_an_error_with_vllms_body() -> None:
    answer = judge_completion(404, recorded("chat-unknown-model.json"), 0.01)
    assert answer.answer is Answer.ERROR
    assert answer.detail == (
        'HTTP 404: {"error":{"message":"The model `nope` does not exist.","type":"NotFoundError",'
        '"param":"model","code":404}}'
    )


def test_a_401_without_the_key_is_an_error_not_a_refusal() -> None:
    answer = judge_completion(401, recorded("no-key.json"), 0.01)
    assert (answer.answer, answer.detail) == (Answer.ERROR, 'HTTP 401: {"error":"Unauthorized"}')


def test_a_chat_completion_is_not_a_completion() -> None:
    """A proxy that routes /v1/completions to the chat endpoint answers `message`, not `text`."""
    answer = judge_completion(200, recorded("chat-plain.json"), 0.01)
    assert answer.answer is Answer.ERROR and answer.detail.startswith('not a completion: {"id":"chatcmpl-')


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("<html>502 Bad Gateway</html>", "not a completion: <html>502 Bad Gateway</html>"),
        ('{"choices": []}', 'not a completion: {"choices": []}'),
        ('{"choices": [{"index": 0}]}', 'not a completion: {"choices": [{"index": 0}]}'),
        ('{"choices": [{"text": null}]}', "a completion without a generated token"),
        (
            '{"choices": [{"text": ""}], "usage": {"completion_tokens": 0}}',
            "a completion without a generated token",
        ),
    ],
)
def test_a_200_that_carries_no_generated_token_is_an_error(body: str, detail: str) -> None:
    answer = judge_completion(200, body, 0.01)
    assert (answer.answer, answer.detail) == (Answer.ERROR, detail)


def test_a_completion_without_usage_passes_with_an_unknown_count() -> None:
    body = json.loads(recorded("completions.json"))
    del body["usage"]
    answer = judge_completion(200, json.dumps(body), 0.01)
    assert (answer.answer, answer.detail) == (Answer.OK, "? tokens")


def test_a_long_error_body_is_cut_to_one_line_of_300_characters() -> None:
    body = "Traceback (most recent call last):\n" + "  File x\n" * 200
    detail = judge_completion(500, body, 0.01).detail
    excerpt = detail.removeprefix("HTTP 500: ")
    assert "\n" not in excerpt and excerpt.endswith("…") and len(excerpt) == 301
    assert excerpt.startswith("Traceback (most recent call last): File x File x")


# ---- sending -------------------------------------------------------------------------------------
def test_the_canary_asks_for_a_few_greedy_tokens_of_the_served_model() -> None:
    http = ScriptedHttp(HttpReply(200, recorded("completions.json")))
    answer = send_canary(http, "tiny", 10.0)
    assert answer.ok
    assert http.posted == [
        (
            "/v1/completions",
            {"model": "tiny", "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0},
            10.0,
        )
    ]


def test_no_answer_by_the_deadline_is_a_timeout_and_no_connection_a_refusal() -> None:
    late = send_canary(ScriptedHttp(HttpReply(0, "", "read timed out", timed_out=True)), "tiny", 2.5)
    assert (late.answer, late.status, late.detail) == (Answer.TIMEOUT, 0, "no answer within 2.5 s")
    gone = send_canary(ScriptedHttp(HttpReply(0, "", "[Errno 111] Connection refused")), "tiny", 2.5)
    assert (gone.answer, gone.detail) == (Answer.REFUSED, "no connection: [Errno 111] Connection refused")


def test_an_answer_reads_as_json_with_its_seconds_rounded() -> None:
    answer = CanaryAnswer(Answer.TIMEOUT, 0, 10.00049, "no answer within 10 s")
    assert answer.to_json() == {
        "answer": "timeout",
        "status": 0,
        "seconds": 10.0,
        "detail": "no answer within 10 s",
    }


# ---- the gate ------------------------------------------------------------------------------------
def gate_check(
    reply: HttpReply, names: tuple[str, ...] = ("tiny",), **table: Any
) -> tuple[Any, ScriptedHttp]:
    clock = FakeClock()
    http = ScriptedHttp(reply)
    expect = Expectations(served_model_names=names, capture_sizes=None)
    ctx = replace(make_context(ScriptedLog(clock), clock, expect), http=http)
    return CanaryGate(table).check(ctx), http


def test_the_gate_passes_on_a_completion_of_the_first_served_name() -> None:
    outcome, http = gate_check(HttpReply(200, recorded("completions.json")), names=("tiny", "tiny-alias"))
    assert outcome.verdict is Verdict.PASS and outcome.summary.endswith("on model tiny")
    assert outcome.evidence["answer"] == "ok" and http.posted[0][1]["model"] == "tiny"


def test_the_gate_waits_for_a_server_not_yet_listening_and_fails_on_a_wrong_answer() -> None:
    refused, _ = gate_check(HttpReply(0, "", "[Errno 111] Connection refused"))
    assert refused.verdict is Verdict.NOT_YET
    wrong, _ = gate_check(HttpReply(404, recorded("chat-unknown-model.json")))
    assert wrong.verdict is Verdict.FAIL and wrong.summary.startswith("canary on model tiny: HTTP 404")
    late, _ = gate_check(HttpReply(0, "", "timed out", timed_out=True))
    assert late.verdict is Verdict.FAIL and "no answer within 10 s" in late.summary


def test_the_gate_sends_its_own_deadline() -> None:
    _, http = gate_check(HttpReply(200, recorded("completions.json")), request_timeout_s=3)
    assert http.posted[0][2] == 3.0


def test_a_profile_without_a_served_name_fails_without_asking() -> None:
    outcome, http = gate_check(HttpReply(200, recorded("completions.json")), names=())
    assert outcome.verdict is Verdict.FAIL and "names no served model" in outcome.summary
    assert http.posted == []


# ---- what the watch makes of them ----------------------------------------------------------------
def test_a_canary_timeout_is_a_miss_that_waited_its_whole_deadline() -> None:
    late = CanaryAnswer(Answer.TIMEOUT, 0, 10.2, "no answer within 10 s")
    obs = probes.canary_observation(late, at=50.0, timeout_s=10.0)
    assert (obs.check, obs.kind, obs.waited_s, obs.detail) == (
        Check.CANARY,
        Kind.TIMEOUT,
        10.0,
        "canary: no answer within 10 s",
    )
    assert not obs.ok


@pytest.mark.parametrize(("answer", "kind"), [(Answer.ERROR, Kind.ERROR), (Answer.REFUSED, Kind.ERROR)])
def test_an_error_or_refused_canary_is_an_error_that_waited_what_it_took(answer: Answer, kind: Kind) -> None:
    obs = probes.canary_observation(CanaryAnswer(answer, 503, 0.02, "HTTP 503: x"), at=1.0, timeout_s=10.0)
    assert (obs.kind, obs.waited_s, obs.figures["answer"]) == (kind, 0.02, str(answer))


def test_a_healthy_canary_says_how_long_it_took() -> None:
    obs = probes.canary_observation(CanaryAnswer(Answer.OK, 200, 0.123, "8 tokens"), at=1.0, timeout_s=10.0)
    assert (obs.kind, obs.detail, obs.ok) == (Kind.OK, "canary answered in 0.12 s", True)


def test_the_tool_call_canary_names_its_case() -> None:
    passed = probes.tool_call_observation(CaseResult("required", True, "called get_weather"), False, 1.0, 0.4)
    wrong = probes.tool_call_observation(
        CaseResult("named", False, "no tool call in the reply"), False, 2.0, 0.4
    )
    late = probes.tool_call_observation(CaseResult("auto", False, ""), True, 3.0, 30.0)
    assert (passed.kind, passed.detail) == (Kind.OK, "tool-call canary (required) passed")
    assert (wrong.kind, wrong.detail, wrong.figures) == (
        Kind.ERROR,
        "tool-call canary (named): no tool call in the reply",
        {"case": "named"},
    )
    assert (late.kind, late.detail, late.waited_s) == (
        Kind.TIMEOUT,
        "tool-call canary (auto): no answer within 30 s",
        30.0,
    )


@pytest.mark.parametrize(
    ("reply", "kind", "detail", "waited"),
    [
        (HttpReply(200, ""), Kind.OK, "/health 200", 0.01),
        (HttpReply(503, ""), Kind.ERROR, "/health answered 503", 0.01),
        (
            HttpReply(0, "", "[Errno 111] Connection refused"),
            Kind.ERROR,
            "/health no connection ([Errno 111] Connection refused)",
            0.01,
        ),  # fmt: skip
        (HttpReply(0, "", "timed out", timed_out=True), Kind.TIMEOUT, "/health: no answer within 5 s", 5.0),
    ],
)
def test_health_is_ok_only_on_200_and_a_timeout_waited_its_deadline(
    reply: HttpReply, kind: Kind, detail: str, waited: float
) -> None:
    """vllm-facts.md §7: /health is 200 with an empty body, 503 once the engine is dead."""
    obs = probes.health_observation(reply, at=7.0, waited_s=0.01, timeout_s=5.0)
    assert (obs.check, obs.kind, obs.detail, obs.waited_s) == (Check.HEALTH, kind, detail, waited)


# ---- the gate through the chain, on a clock the server moves --------------------------------------
@dataclass
class ClockedServer:
    """Refuses connections until `listening_at` (fake seconds since 1000), then answers after
    `takes_s` with `reply`; a reply that timed out takes the whole deadline."""

    clock: FakeClock
    reply: HttpReply
    listening_at: float = 0.0
    takes_s: float = 0.0
    posted_at: list[float] = field(default_factory=list)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        raise AssertionError("the canary only posts")

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        self.posted_at.append(self.clock.now - 1000.0)
        if self.clock.now - 1000.0 < self.listening_at:
            return HttpReply(0, "", "[Errno 111] Connection refused")
        self.clock.sleep(timeout_s if self.reply.timed_out else self.takes_s)
        return self.reply

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        raise AssertionError("the canary only posts")


def chained(server: ClockedServer, **table: Any) -> Any:
    expect = Expectations(served_model_names=("tiny",), capture_sizes=None)
    ctx = replace(make_context(ScriptedLog(server.clock), server.clock, expect), http=server)
    return ChainRunner([CanaryGate({"poll_s": 1.0, **table})]).run(ctx).results[0]


def test_the_gate_asks_again_until_the_server_listens_then_passes() -> None:
    clock = FakeClock()
    server = ClockedServer(
        clock, HttpReply(200, recorded("completions.json")), listening_at=4.0, takes_s=0.25
    )
    result = chained(server)
    assert server.posted_at == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert (result.verdict, result.summary) == (Verdict.PASS, "canary answered in 0.25 s on model tiny")
    assert result.evidence["seconds"] == 0.25  # measured on the clock the gate was given


def test_a_server_that_never_listens_fails_at_the_deadline_with_the_refusal() -> None:
    clock = FakeClock()
    server = ClockedServer(clock, HttpReply(200, recorded("completions.json")), listening_at=float("inf"))
    result = chained(server, timeout_s=5)
    assert (result.verdict, result.duration_s) == (Verdict.FAIL, 5.0)
    assert result.summary == "deadline 5s passed: canary: no connection: [Errno 111] Connection refused"
    assert result.evidence["answer"] == "refused"


@pytest.mark.parametrize(
    ("reply", "summary", "duration"),
    [
        (
            HttpReply(0, "", "read timed out", timed_out=True),
            "canary on model tiny: no answer within 3 s",
            3.0,
        ),
        (
            HttpReply(500, "Internal Server Error"),
            "canary on model tiny: HTTP 500: Internal Server Error",
            0.5,
        ),
    ],
)
def test_a_late_or_wrong_answer_fails_at_once_without_asking_again(
    reply: HttpReply, summary: str, duration: float
) -> None:
    """A server that answers, late or wrong, is not starting up: waiting to the deadline helps nothing."""
    clock = FakeClock()
    server = ClockedServer(clock, reply, takes_s=0.5)
    result = chained(server, request_timeout_s=3)
    assert (result.verdict, result.summary, result.duration_s) == (Verdict.FAIL, summary, duration)
    assert server.posted_at == [0.0]
