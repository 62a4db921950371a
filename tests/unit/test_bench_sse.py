"""The SSE reader (launcher/bench/sse.py) on odd but legal streams: line endings cut between network
chunks, fields other than `data`, chunks vLLM sends that carry no text, and shapes of other servers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from launcher.bench.sse import StreamView, read_stream, sse_data


def data(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def choice(delta: Any, finish: str | None = None, rid: str = "chatcmpl-1") -> dict[str, Any]:
    return {"id": rid, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


DONE = b"data: [DONE]\n\n"


# ---- framing of events -------------------------------------------------------------------------------


def test_a_crlf_cut_between_two_network_chunks_still_ends_the_event() -> None:
    parts = [(1.0, b'data: {"a": 1}\r'), (2.0, b"\n\r"), (3.0, b"\n")]
    assert list(sse_data(parts)) == [(3.0, b'{"a": 1}')]  # the blank line completed it at 3.0


@pytest.mark.parametrize("cut", range(1, len(b'data: {"a": 1}\r\n\r\n')))
def test_any_cut_of_a_crlf_event_gives_one_payload_at_the_second_chunk(cut: int) -> None:
    raw = b'data: {"a": 1}\r\n\r\n'
    assert list(sse_data([(1.0, raw[:cut]), (2.0, raw[cut:])])) == [(2.0, b'{"a": 1}')]


def test_events_take_the_time_of_the_chunk_that_completed_them() -> None:
    first, second = b'data: {"n": 1}\n\n', b'data: {"n": 2}\n\n'
    parts = [(1.0, first + second[:5]), (2.0, second[5:])]
    assert list(sse_data(parts)) == [(1.0, b'{"n": 1}'), (2.0, b'{"n": 2}')]


def test_fields_other_than_data_and_comments_are_skipped() -> None:
    raw = b': keep-alive\n\nevent: message\nid: 7\ndata: {"x": 1}\nretry: 10\n\n'
    assert [payload for _, payload in sse_data([(1.0, raw)])] == [b'{"x": 1}']


def test_data_without_a_space_after_the_colon_is_still_data() -> None:
    assert list(sse_data([(1.0, b"data:[DONE]\n\n")])) == [(1.0, b"[DONE]")]


def test_an_event_without_its_blank_line_is_never_yielded() -> None:
    assert list(sse_data([(1.0, b'data: {"cut": tr')])) == []
    view = read_stream([(1.0, data(choice({"content": "a"}))), (2.0, b'data: {"cut": tr')])
    assert view.content_text == "a" and view.error == "the stream ended without `data: [DONE]`"


# ---- which chunks are output events ----------------------------------------------------------------


def test_the_role_only_opening_chunk_is_not_an_output_event() -> None:
    view = StreamView()
    view.take(1.0, choice({"role": "assistant", "content": ""}))
    assert view.event_times == [] and view.first_content_time is None


def test_a_role_chunk_that_carries_text_is_an_output_event() -> None:
    view = StreamView()
    view.take(1.0, choice({"role": "assistant", "content": "Hi"}))
    assert view.event_times == [1.0] and view.first_content_time == 1.0


def test_an_empty_step_mid_stream_is_an_output_event_without_text() -> None:
    # vLLM 0.26: a byte-level token that does not yet decode to UTF-8 arrives as `"content": ""`
    view = StreamView()
    view.take(1.0, choice({"content": "a"}))
    view.take(2.0, choice({"content": ""}))
    view.take(3.0, choice({"content": "b"}))
    assert view.event_times == [1.0, 2.0, 3.0] and view.content_events == 2 and view.content_text == "ab"


def test_the_finish_chunk_is_an_output_event_and_keeps_its_reason() -> None:
    view = StreamView()
    view.take(1.0, choice({}, finish="length"))
    assert view.event_times == [1.0] and view.finish_reason == "length"


def test_the_usage_chunk_is_no_event_and_a_later_null_usage_keeps_it() -> None:
    view = StreamView()
    view.take(1.0, {"id": "c", "choices": [], "usage": {"completion_tokens": 3}})
    view.take(2.0, {"id": "c", "choices": [], "usage": None})
    assert view.event_times == [] and view.usage == {"completion_tokens": 3}


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": [{"index": 0, "delta": "text"}]},  # delta not an object
        {"choices": ["text"]},  # a choice not an object
        {"choices": {"0": {"delta": {"content": "x"}}}},  # choices not a list
        {"object": "something else"},
    ],
)
def test_shapes_of_other_servers_are_not_output_events(payload: dict[str, Any]) -> None:
    view = StreamView()
    view.take(1.0, payload)
    assert view.event_times == [] and view.content == [] and view.error is None


def test_tool_call_deltas_are_events_but_not_answer_text() -> None:
    view = StreamView()
    view.take(1.0, choice({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}))
    view.take(2.0, choice({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))
    assert view.event_times == [1.0, 2.0] and view.tool_call_deltas == 2
    assert view.content_text == "" and view.first_content_time is None


def test_reasoning_is_read_from_either_field_name_and_kept_apart_from_the_answer() -> None:
    view = StreamView()
    view.take(1.0, choice({"reasoning_content": "old"}))  # before vLLM 0.33
    view.take(2.0, choice({"reasoning": "new"}))
    view.take(3.0, choice({"reasoning": "", "reasoning_content": "second"}))  # the first non-empty one
    view.take(4.0, choice({"content": "answer"}))
    assert view.reasoning_text == "oldnewsecond" and view.reasoning_events == 3
    assert view.content_text == "answer" and view.first_content_time == 4.0
    assert view.event_times == [1.0, 2.0, 3.0, 4.0]


def test_the_response_id_is_the_first_chunks() -> None:
    view = StreamView()
    view.take(1.0, choice({"content": "a"}, rid="chatcmpl-first"))
    view.take(2.0, choice({"content": "b"}, rid="chatcmpl-other"))
    assert view.response_id == "chatcmpl-first"


def test_an_error_event_keeps_its_message_whatever_its_shape() -> None:
    view = StreamView()
    view.take(1.0, {"error": {"message": "EngineCore encountered an issue.", "code": 500}})
    assert view.error == "EngineCore encountered an issue." and view.event_times == []
    view.take(2.0, {"error": "plain text"})
    assert view.error == "plain text"


# ---- the stream as a whole ---------------------------------------------------------------------------


def test_an_unparsable_event_is_an_error_but_the_rest_is_still_read() -> None:
    view = read_stream([(1.0, b"data: {not json\n\n" + data(choice({"content": "ok"})) + DONE)])
    assert view.error is not None and view.error.startswith("unparsable SSE data: b'{not json'")
    assert view.content_text == "ok" and view.done


def test_a_json_value_that_is_not_an_object_is_ignored() -> None:
    view = read_stream([(1.0, b"data: 42\n\ndata: [1, 2]\n\n" + DONE)])
    assert view.error is None and view.event_times == [] and view.done


def test_done_alone_is_a_complete_empty_stream() -> None:
    view = read_stream([(1.0, DONE)])
    assert view.done and view.error is None and view.content_text == ""


def test_the_whole_stream_byte_by_byte_reads_as_in_one_piece() -> None:
    raw = (
        data(choice({"role": "assistant", "content": ""}))
        + data(choice({"content": "Hello"}))
        + data(choice({"content": " world"}, finish="stop"))
        + data({"id": "chatcmpl-1", "choices": [], "usage": {"completion_tokens": 3}})
        + DONE
    ).replace(b"\n", b"\r\n")
    whole = read_stream([(1.0, raw)])
    split = read_stream([(float(i), bytes([b])) for i, b in enumerate(raw)])
    assert (split.content_text, split.finish_reason, split.usage, split.done) == (
        whole.content_text,
        whole.finish_reason,
        whole.usage,
        whole.done,
    )
    assert len(split.event_times) == len(whole.event_times) == 2
    assert split.event_times == sorted(split.event_times) and split.event_times[0] < split.event_times[1]
