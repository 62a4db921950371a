"""The tool-call judges on reply bodies shaped like vLLM 0.33's (vllm-facts.md §7)."""

from __future__ import annotations

import json
from typing import Any

from gates.tool_cases import CASES, judge_reply, judge_stream, schema_problem

AUTO = next(c for c in CASES if c.name == "auto")
NO_TOOL = next(c for c in CASES if c.name == "no_tool")
STREAM = next(c for c in CASES if c.name == "auto_stream")


def body(message: dict[str, Any], finish: str = "tool_calls") -> str:
    return json.dumps(
        {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    )


def call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_good_call_passes() -> None:
    result = judge_reply(
        AUTO, 200, body({"role": "assistant", "tool_calls": [call("get_weather", '{"city": "Paris"}')]})
    )
    assert result.ok, result.why


def test_wrong_function_malformed_json_and_schema_mismatch_fail() -> None:
    wrong = judge_reply(AUTO, 200, body({"tool_calls": [call("get_time", '{"city": "Paris"}')]}))
    assert not wrong.ok and "called 'get_time'" in wrong.why
    broken = judge_reply(AUTO, 200, body({"tool_calls": [call("get_weather", '{"city": "Par')]}))
    assert not broken.ok and "not valid JSON" in broken.why
    missing = judge_reply(AUTO, 200, body({"tool_calls": [call("get_weather", '{"town": "Paris"}')]}))
    assert not missing.ok and "missing required 'city'" in missing.why


def test_plain_text_and_http_errors_fail_with_the_body() -> None:
    text = judge_reply(AUTO, 200, body({"content": "It is sunny."}, finish="stop"))
    assert not text.ok and "answered in text" in text.why
    error = '{"error": {"message": "The model `fable-9b` does not exist.", "code": 404}}'
    not_found = judge_reply(AUTO, 404, error)
    assert not not_found.ok and not_found.why == "HTTP 404" and "does not exist" in not_found.body


def test_reasoning_that_spends_the_budget_is_reported_as_such() -> None:
    result = judge_reply(
        AUTO, 200, body({"content": None, "reasoning": "Let me think " * 50}, finish="length")
    )
    assert not result.ok and result.why == "reasoning used the whole budget before any call"


def test_no_tool_case_wants_text_not_a_call() -> None:
    assert judge_reply(NO_TOOL, 200, body({"content": "Hello there!"}, finish="stop")).ok
    assert not judge_reply(NO_TOOL, 200, body({"tool_calls": [call("get_weather", "{}")]})).ok


def test_streamed_argument_deltas_assemble_into_json() -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "chatcmpl-tool-9", "type": "function",
                                                           "function": {"name": "get_weather", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}},
    ]  # fmt: skip
    payloads = [json.dumps(c) for c in chunks] + ["[DONE]"]
    assert judge_stream(STREAM, payloads).ok
    broken = payloads[:3] + payloads[4:]
    result = judge_stream(STREAM, broken)
    assert not result.ok and "not valid JSON" in result.why


def test_schema_subset() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "u": {"type": "string", "enum": ["a"]}},
              "required": ["n"]}  # fmt: skip
    assert schema_problem({"n": 3}, schema) is None
    assert "should be integer" in (schema_problem({"n": True}, schema) or "")
    assert "not one of" in (schema_problem({"n": 1, "u": "b"}, schema) or "")


def test_a_call_begun_in_text_but_never_finished_is_named_as_such() -> None:
    # The real vLLM 0.26.0 answer of a random-weight model to tool_choice="required" (H200 run).
    content = '<tool_call>\n{"name": "get_weather", "arguments": {"city"' + "\n" * 900
    result = judge_reply(AUTO, 200, body({"content": content}, finish="length"))
    assert not result.ok
    assert result.why.startswith("a call was begun in text but never completed (finish_reason=length)")
    assert len(result.to_json()["body"]) < 2000


def test_a_call_the_parser_could_not_read_comes_back_as_text() -> None:
    # vLLM 0.26.0's hermes parser on JSON it cannot load: tools_called=False, the raw text as content.
    content = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "}\n</tool_call>'
    result = judge_reply(AUTO, 200, body({"content": content, "tool_calls": []}, finish="stop"))
    assert not result.ok
    assert result.why.startswith("the tool parser could not read the call: it came back as text")
