"""How the simulator reads a hermes-format answer and what it logs when it cannot (vllm_sim/structured.py,
request_errors.py), as vLLM 0.26.0's hermes parser does (tool_parsers/hermes_tool_parser.py:85-120:
`<tool_call>(.*?)</tool_call>|<tool_call>(.*)`, json.loads of each, arguments re-dumped, and on any
failure `logger.exception` and the raw text returned as content)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import pytest

from vllm_sim.logline import LogWriter
from vllm_sim.request_errors import log_parse_failure, log_unknown_model, raw_tool_text
from vllm_sim.structured import forced_text, hermes_calls, hermes_raw_calls
from vllm_sim.toolcalls import PlannedCall
from vllm_sim.versions import DIALECTS

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}\n</tool_call>'


def test_a_literal_regex_forces_its_text_and_anything_else_forces_nothing() -> None:
    assert (
        forced_text({"structured_outputs": {"regex": "<tool_call>x</tool_call>"}})
        == "<tool_call>x</tool_call>"
    )
    assert forced_text({"structured_outputs": {"regex": r"3\.14 \(pi\)"}}) == "3.14 (pi)", (
        "escapes are literal"
    )
    for regex in ("a|b", "[0-9]+", "x*", "(a)", "^a$", "a.b"):
        assert forced_text({"structured_outputs": {"regex": regex}}) is None, regex
    assert forced_text({}) is None
    assert forced_text({"structured_outputs": {"json": {"type": "object"}}}) is None
    assert (
        forced_text({"structured_outputs": "regex"}) is None
        and forced_text({"structured_outputs": {"regex": 3}}) is None
    )


@pytest.mark.parametrize("regex", [r"\d", r"code \w", r"\bword\b", r"x\1", r"\s", "abc\\"])
def test_an_escaped_letter_or_digit_is_a_class_or_an_anchor_not_that_letter(regex: str) -> None:
    """Was: `\\d` forced the text "d", though the regex allows any digit; a trailing backslash
    (a regex vLLM refuses) forced the text before it."""
    assert forced_text({"structured_outputs": {"regex": regex}}) is None


def test_escaped_punctuation_is_that_character() -> None:
    regex = r"\{\"name\": \"x\"\} \- \\ \/"
    assert forced_text({"structured_outputs": {"regex": regex}}) == '{"name": "x"} - \\ /'


def test_a_call_is_read_with_its_arguments_dumped_as_hermes_dumps_them() -> None:
    [call] = hermes_calls(CALL) or []
    assert call.name == "get_weather"
    assert call.arguments == '{"city": "Paris", "unit": "°C"}', "json.dumps(..., ensure_ascii=False)"
    assert re.fullmatch(r"chatcmpl-tool-[0-9a-f]{16}", call.id)


def test_several_calls_an_unclosed_last_one_and_text_around_them_are_read() -> None:
    text = f'Let me check.\n{CALL}\n<tool_call>\n{{"name": "get_time", "arguments": {{}}}}'
    calls = hermes_calls(text) or []
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", '{"city": "Paris", "unit": "°C"}'),
        ("get_time", "{}"),
    ]
    assert len({c.id for c in calls}) == 2


def test_no_tag_is_no_call_and_one_that_does_not_load_spoils_them_all() -> None:
    assert hermes_calls("The weather in Paris is mild.") == []
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    assert hermes_calls(f"{CALL}\n{broken}") is None
    assert hermes_calls('<tool_call>{"arguments": {}}</tool_call>') is None, "no name: a KeyError in hermes"
    assert hermes_calls("<tool_call>[1, 2]</tool_call>") is None


def test_a_call_hermes_cannot_load_is_streamed_as_written() -> None:
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    [call] = hermes_raw_calls(broken)
    assert (call.name, call.arguments) == ("get_weather", '{"city": Paris}')
    assert hermes_raw_calls("<tool_call>not a call at all</tool_call>") == []


def test_planned_calls_are_written_back_as_a_hermes_model_writes_them() -> None:
    calls = [PlannedCall("c1", "get_weather", '{"city": "Paris"}'), PlannedCall("c2", "get_time", "{}")]
    text = raw_tool_text(calls)
    assert text == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    )
    assert [(c.name, json.loads(c.arguments)) for c in hermes_calls(text) or []] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {}),
    ]


@pytest.fixture
def log_pipe() -> Iterator[tuple[LogWriter, int]]:
    read_end, write_end = os.pipe()
    yield LogWriter("APIServer", DIALECTS["0.26"], out_fd=write_end, err_fd=write_end), read_end
    os.close(read_end)
    os.close(write_end)


def written(read_end: int) -> list[str]:
    os.set_blocking(read_end, False)
    try:
        text = os.read(read_end, 1 << 20).decode()
    except BlockingIOError:
        return []
    return [line.split("] ", 1)[1] for line in text.rstrip("\n").split("\r\n")]


def test_a_call_that_does_not_parse_logs_hermes_exception_with_jsons_frames(
    log_pipe: tuple[LogWriter, int],
) -> None:
    log, read_end = log_pipe
    log_parse_failure(
        log, DIALECTS["0.26"], '<tool_call>\n{"name": "f", "arguments": {"city": Paris}}\n</tool_call>'
    )
    lines = written(read_end)
    assert lines[0] == "Error in extracting tool call from response."
    assert lines[1] == "Traceback (most recent call last):"
    assert [line.split(", in ")[-1] for line in lines[2:-1]] == [
        "extract_tool_calls",
        "loads",
        "decode",
        "raw_decode",
    ]
    assert lines[-1] == "json.decoder.JSONDecodeError: Expecting value: line 2 column 37 (char 37)"


def test_extra_data_is_raised_by_decode_itself(log_pipe: tuple[LogWriter, int]) -> None:
    log, read_end = log_pipe
    log_parse_failure(log, DIALECTS["0.26"], '<tool_call>{"name": "f", "arguments": {}} trailing</tool_call>')
    lines = written(read_end)
    assert [line.split(", in ")[-1] for line in lines[2:-1]] == ["extract_tool_calls", "loads", "decode"]
    assert lines[-1].startswith("json.decoder.JSONDecodeError: Extra data: ")


def test_a_call_that_parses_logs_nothing(log_pipe: tuple[LogWriter, int]) -> None:
    log, read_end = log_pipe
    log_parse_failure(log, DIALECTS["0.26"], CALL)
    assert written(read_end) == []


def test_an_unknown_model_is_logged_as_vllm_logs_its_error_info(log_pipe: tuple[LogWriter, int]) -> None:
    log, read_end = log_pipe
    log_unknown_model(log, DIALECTS["0.26"], "gpt-4")
    assert written(read_end) == [
        "Error with model error=ErrorInfo(message='The model `gpt-4` does not exist.', type='NotFoundError', "
        "param='model', code=404)"
    ]
