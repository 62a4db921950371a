"""The tool-call judges on reply bodies shaped like vLLM 0.33's (vllm-facts.md §7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gates.tool_cases import CASES, WEATHER_TOOL, ToolCase, judge_reply, judge_stream, schema_problem

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


# ---- vLLM 0.26.0's recorded replies (tests/data/real-vllm-0.26/eager: a random-weight model) -------
RECORDED = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "eager"
REQUIRED = next(c for c in CASES if c.name == "required")


def recorded(name: str) -> str:
    return (RECORDED / name).read_text(encoding="utf-8")


def recorded_stream(name: str) -> list[str]:
    return [line[len("data: ") :] for line in recorded(name).splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("case", [AUTO, REQUIRED], ids=["auto", "required"])
def test_a_call_the_hermes_parser_could_not_load_is_told_as_such(case: ToolCase) -> None:
    """`{"city": Paris}`: not JSON, so vLLM returned the model's text as content, with no tool_calls."""
    result = judge_reply(case, 200, recorded("chat-hermes-broken.json"))
    assert not result.ok
    assert result.why == (
        "the tool parser could not read the call: it came back as text, not valid JSON: "
        '\'<tool_call>{"name": "get_weather", "arguments": {"city": Paris}}</tool_call>\''
    )


def test_a_call_cut_by_max_tokens_is_told_as_begun_not_as_unreadable() -> None:
    result = judge_reply(REQUIRED, 200, recorded("chat-tool-required.json"))
    assert result.why == (
        "a call was begun in text but never completed (finish_reason=length): "
        '\'<tool_call>{"name": "get_weather", "arguments": {"city"\''
    )


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("chat-hermes-broken.sse", "arguments are not valid JSON: '{\"city\": Paris}}'"),
        ("chat-tool-required.sse", "arguments are not valid JSON: '{\"city\"'"),
    ],
)
def test_streamed_calls_are_assembled_from_vllms_pieces_before_they_are_judged(name: str, why: str) -> None:
    """Streamed, the parser sends the name and then the arguments piece by piece, broken or not."""
    result = judge_stream(STREAM, recorded_stream(name))
    assert (result.ok, result.why) == (False, why)
    assert result.body.endswith("[DONE]")


def test_a_reply_of_newlines_only_is_no_answer_whole_or_streamed() -> None:
    whole = judge_reply(NO_TOOL, 200, recorded("chat-plain.json"))
    streamed = judge_stream(NO_TOOL, recorded_stream("chat-plain.sse"))
    assert (whole.ok, whole.why) == (False, "empty answer")
    assert (streamed.ok, streamed.why) == (False, "empty answer")
    asked = judge_reply(AUTO, 200, recorded("chat-plain.json"))
    assert asked.why == "no tool call; answered in text: '" + "\\n" * 16 + "'"


def test_a_streamed_call_for_a_question_that_needs_no_tool_fails() -> None:
    result = judge_stream(NO_TOOL, recorded_stream("chat-hermes-broken.sse"))
    assert (result.ok, result.why) == (False, "called get_weather for a question that needs no tool")


# ---- odd but real-shaped replies -------------------------------------------------------------------
def test_reasoning_under_its_older_name_is_reasoning_too() -> None:
    """vLLM before 0.10 named the field `reasoning_content`."""
    message = {"content": None, "reasoning_content": "The user wants the weather. " * 40}
    result = judge_reply(AUTO, 200, body(message, finish="length"))
    assert result.why == "reasoning used the whole budget before any call"
    no_answer = judge_reply(NO_TOOL, 200, body(message, finish="length"))
    assert no_answer.why == "reasoning used the whole budget: no answer text"


def test_an_empty_answer_that_stopped_is_empty_not_a_budget_problem() -> None:
    reply = body({"content": "", "reasoning": "I should greet."}, finish="stop")
    assert judge_reply(NO_TOOL, 200, reply).why == "empty answer"
    assert judge_reply(AUTO, 200, reply).why == "no tool call; answered in text: ''"


def test_text_that_was_cut_by_the_budget_after_reasoning_is_still_an_answer() -> None:
    reply = body({"content": "Hello! How can I", "reasoning": "A greeting. " * 30}, finish="length")
    assert judge_reply(NO_TOOL, 200, reply).ok
    assert judge_reply(AUTO, 200, reply).why == "no tool call; answered in text: 'Hello! How can I'"


def test_a_closed_call_followed_by_one_cut_by_the_budget_is_told_as_begun() -> None:
    content = '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>\n<tool_call>{"name": "get_w'
    result = judge_reply(AUTO, 200, body({"content": content}, finish="length"))
    assert result.why.startswith("a call was begun in text but never completed (finish_reason=length)")


def test_only_the_first_of_several_calls_is_judged() -> None:
    right_first = [call("get_weather", '{"city": "Paris"}'), call("get_time", "not json")]
    assert judge_reply(AUTO, 200, body({"tool_calls": right_first})).ok
    wrong_first = [call("get_time", "{}"), call("get_weather", '{"city": "Paris"}')]
    assert (
        judge_reply(AUTO, 200, body({"tool_calls": wrong_first})).why
        == "called 'get_time', expected 'get_weather'"
    )


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ("", "arguments are not valid JSON: ''"),
        ('["Paris"]', "arguments do not match the schema: expected an object, got list"),
        ('{"city": 75001}', "arguments do not match the schema: 'city' should be string, got 75001"),
        (
            '{"city": "Paris", "unit": "kelvin"}',
            "arguments do not match the schema: 'unit' = 'kelvin' is not one of",
        ),
        ('{"unit": "celsius"}', "arguments do not match the schema: missing required 'city'"),
    ],
)
def test_arguments_are_json_of_the_tools_schema(arguments: str, why: str) -> None:
    result = judge_reply(AUTO, 200, body({"tool_calls": [call("get_weather", arguments)]}))
    assert not result.ok and result.why.startswith(why), result.why


def test_properties_the_schema_does_not_name_are_let_through() -> None:
    arguments = '{"city": "Paris", "unit": "celsius", "country": "FR"}'
    result = judge_reply(AUTO, 200, body({"tool_calls": [call("get_weather", arguments)]}))
    assert (result.ok, result.why) == (True, f"called get_weather({arguments})")


def test_a_call_of_several_streamed_calls_is_assembled_by_its_index_whatever_the_order() -> None:
    def piece(index: int | None, name: str = "", arguments: str = "") -> str:
        function = {"name": name, "arguments": arguments} if name else {"arguments": arguments}
        item: dict[str, Any] = (
            {"function": function} if index is None else {"index": index, "function": function}
        )
        return json.dumps({"choices": [{"delta": {"tool_calls": [item]}}]})

    payloads = [
        piece(1, "get_time", "{"),
        piece(None, "get_weather", '{"city": '),  # no index: the first call's
        piece(1, arguments="}"),
        piece(0, arguments='"Paris"}'),
        json.dumps({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        "[DONE]",
    ]
    result = judge_stream(STREAM, payloads)
    assert (result.ok, result.why) == (True, 'called get_weather({"city": "Paris"})')


def test_a_stream_that_is_no_stream_fails_with_what_it_was() -> None:
    assert judge_stream(STREAM, []).why == "the stream was empty (no connection or no data)"
    broken = judge_stream(STREAM, ['{"choices": [', "[DONE]"])
    assert (broken.why, broken.body) == ("a stream chunk is not JSON", '{"choices": [')
    only_done = judge_stream(STREAM, ["[DONE]"])
    assert only_done.why == "no tool call; answered in text: ''"


def test_streamed_reasoning_that_spends_the_budget_is_told_as_such() -> None:
    chunks: list[dict[str, Any]] = [{"choices": [{"delta": {"reasoning": "Let me think. "}}]}] * 5
    chunks.append({"choices": [{"delta": {}, "finish_reason": "length"}]})
    result = judge_stream(STREAM, [json.dumps(c) for c in chunks] + ["[DONE]"])
    assert result.why == "reasoning used the whole budget before any call"


def test_no_connection_and_a_long_body_are_reported_within_bounds() -> None:
    assert judge_reply(AUTO, 0, "").why == "HTTP no connection"
    long = "x" * 1500 + "MIDDLE" + "y" * 1000
    shown = judge_reply(AUTO, 500, long).to_json()["body"]
    assert shown == "x" * 1500 + " … " + "y" * 400 and "MIDDLE" not in shown
    short = judge_reply(AUTO, 500, "z" * 2000).to_json()["body"]
    assert short == "z" * 2000


def test_each_case_asks_for_the_weather_tool_as_its_choice_says() -> None:
    by_name = {case.name: case.request("tiny", 64) for case in CASES}
    assert {name: b["tool_choice"] for name, b in by_name.items()} == {
        "auto": "auto",
        "required": "required",
        "named": {"type": "function", "function": {"name": "get_weather"}},
        "no_tool": "auto",
        "auto_stream": "auto",
    }
    assert all(
        b["tools"] == [WEATHER_TOOL] and b["max_tokens"] == 64 and b["temperature"] == 0
        for b in by_name.values()
    )
    assert by_name["auto_stream"]["stream_options"] == {"include_usage": True}
    assert [name for name, b in by_name.items() if b.get("stream")] == ["auto_stream"]
