"""Replies in any shape but vLLM's are a failed case or a skipped event, never an exception: a proxy,
a wrong server or a broken build can answer anything."""

from __future__ import annotations

import json

import pytest

from gates.tool_cases import CASES, judge_reply, judge_stream
from launcher.bench.sse import StreamView

CASE = CASES[0]


@pytest.mark.parametrize(
    "body",
    ['{"choices": ["x"]}', '{"choices": [{"message": "text"}]}', '{"choices": {"0": {}}}', "[1]", "null"],
)
def test_a_reply_not_shaped_as_a_chat_completion_fails_the_case(body: str) -> None:
    result = judge_reply(CASE, 200, body)
    assert not result.ok and result.why == "the body is not a chat completion"


@pytest.mark.parametrize(
    "chunk",
    [{"choices": ["x"]}, {"choices": [{"delta": "text"}]}, {"choices": [{"delta": {"tool_calls": [3]}}]}],
)
def test_a_stream_chunk_not_shaped_as_vllms_fails_the_case(chunk: object) -> None:
    result = judge_stream(CASE, [json.dumps(chunk), "[DONE]"])
    assert not result.ok and result.why == "a stream chunk is not a chat completion chunk"


@pytest.mark.parametrize(
    "payload", [{"choices": {"0": {}}}, {"choices": [{"delta": "text"}]}, {"choices": "x"}]
)
def test_a_bench_stream_event_of_another_shape_is_no_output_event(payload: dict[str, object]) -> None:
    view = StreamView()
    view.take(1.0, payload)
    assert view.event_times == [] and view.error is None
