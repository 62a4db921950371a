"""The simulator's OpenAI-compatible shapes (vllm_sim/openai_api.py, vllm-facts.md §7) and the bench's
reading of them agree: what the simulator streams, `launch bench` parses back token for token (its SSE
reader and record, launcher/bench/sse.py, record.py), and its error bodies are the messages the
bench's client quotes. Also what the simulator accepts as a prompt, and when it answers the same."""

from __future__ import annotations

import json

import pytest

from launcher.bench.client import _error_text
from launcher.bench.exchange import Exchange, Phase, Tag
from launcher.bench.record import build_record
from launcher.bench.sse import read_stream
from vllm_sim.generation import Channel, Plan, Tok
from vllm_sim.http_messages import json_response
from vllm_sim.openai_api import (
    chat_delta,
    chat_message,
    chunk,
    error_body,
    message_text,
    render_chat,
    render_completion,
    request_id,
    seed_for,
    usage,
)
from vllm_sim.toolcalls import PlannedCall, RequestInvalid

CALL = PlannedCall("chatcmpl-tool-0123456789abcdef", "get_weather", '{"city": "Paris"}')
THINK = [Tok("The user", Channel.REASONING), Tok(" wants weather.", Channel.REASONING)]
SAY = [Tok("Checking", Channel.CONTENT), Tok(" now.", Channel.CONTENT)]
TOOL = [Tok("get_weather", Channel.TOOL_NAME, 0), Tok('{"city": ', Channel.TOOL_ARGS, 0),
        Tok('"Paris"}', Channel.TOOL_ARGS, 0)]  # fmt: skip
EOS = [Tok("", Channel.HIDDEN)]
PLAN = Plan((*THINK, *SAY, *TOOL, *EOS), "tool_calls", None, (CALL,))


def streamed(plan: Plan, steps: list[list[Tok]], field: str = "reasoning") -> bytes:
    """One chunk per engine step, as the simulator's stream sends them, then finish and usage."""
    rid, created = "chatcmpl-abc", 1_700_000_000
    out = [chunk(rid, created, "m", [{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    for step in steps:
        delta = chat_delta(step, plan, field)
        if delta is not None:
            out.append(chunk(rid, created, "m", [{"index": 0, "delta": delta, "finish_reason": None}]))
    out.append(chunk(rid, created, "m", [{"index": 0, "delta": {}, "finish_reason": plan.finish_reason}]))
    out.append(chunk(rid, created, "m", [], use=usage(20, len(plan.tokens), 16)))
    return b"".join(out) + b"data: [DONE]\n\n"


def test_a_streamed_answer_reads_back_token_for_token() -> None:
    steps = [[t] for t in PLAN.tokens]
    view = read_stream([(1.0, streamed(PLAN, steps))])
    assert view.done and view.error is None
    assert (view.reasoning_text, view.content_text) == ("The user wants weather.", "Checking now.")
    assert view.tool_call_deltas == 3 and view.finish_reason == "tool_calls"
    # every step that showed something, and the finish: the EOS alone shows nothing and sends no chunk
    assert len(view.event_times) == len(PLAN.tokens) - 1 + 1
    assert view.usage == {"prompt_tokens": 20, "total_tokens": 28, "completion_tokens": 8,
                          "prompt_tokens_details": {"cached_tokens": 16}}  # fmt: skip


def test_the_bench_counts_what_usage_says_and_the_cache_hit() -> None:
    body = streamed(PLAN, [[t] for t in PLAN.tokens])
    record = build_record(Exchange(Tag(Phase.TIMED, "short"), "r", 0.0, 1.0, 200, ((0.5, body),)))
    assert record.ok and (record.output_tokens, record.prompt_tokens, record.cached_tokens) == (8, 20, 16)
    assert record.tokens_from_usage and record.reasoning_tokens > 0 and record.tool_call_deltas == 3


def test_a_tool_call_streams_its_name_once_then_its_arguments_in_pieces() -> None:
    [named] = chat_delta(TOOL[:1], PLAN, "reasoning")["tool_calls"]  # type: ignore[index]
    assert named == {"index": 0, "id": CALL.id, "type": "function", "function": {"name": "get_weather"}}
    [args] = chat_delta(TOOL[1:], PLAN, "reasoning")["tool_calls"]  # type: ignore[index]
    assert args == {"index": 0, "function": {"arguments": '{"city": "Paris"}'}}
    assert chat_delta(EOS, PLAN, "reasoning") is None


def test_one_engine_step_of_several_tokens_is_one_delta() -> None:
    delta = chat_delta([*THINK, *SAY], PLAN, "reasoning_content")
    assert delta == {"reasoning_content": "The user wants weather.", "content": "Checking now."}


def test_a_message_with_only_tool_calls_has_null_content() -> None:
    message = chat_message(PLAN, "reasoning")
    assert message["content"] == "Checking now." and message["reasoning"] == "The user wants weather."
    calls_only = Plan((*TOOL, *EOS), "tool_calls", None, (CALL,))
    quiet = chat_message(calls_only, "reasoning")
    assert quiet["content"] is None and quiet["reasoning"] is None
    function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert quiet["tool_calls"] == [{"id": CALL.id, "type": "function", "function": function}]
    empty = chat_message(Plan(tuple(EOS), "stop", None, ()), "reasoning")
    assert empty["content"] == "" and "tool_calls" not in empty


def test_an_error_body_is_vllms_and_the_bench_quotes_its_message() -> None:
    body = error_body("max_tokens must be at least 1, got 0.", "BadRequestError", 400, "max_tokens")
    assert body == {"error": {"message": "max_tokens must be at least 1, got 0.", "type": "BadRequestError",
                              "param": "max_tokens", "code": 400}}  # fmt: skip
    raw = json_response(body, 400).body
    assert raw.startswith(b'{"error":{"message":"') and b'","type":"BadRequestError","param":' in raw, (
        "compact"
    )
    assert _error_text(400, raw.decode()) == "HTTP 400: max_tokens must be at least 1, got 0."


def test_ids_take_the_request_id_header_or_a_release_sized_hex() -> None:
    assert request_id("chatcmpl", "bench-r-1") == "chatcmpl-bench-r-1"
    old, new = request_id("chatcmpl", None, 16), request_id("chatcmpl", None)
    assert len(old) == len("chatcmpl-") + 16 and len(new) == len("chatcmpl-") + 32
    assert request_id("chatcmpl", None) != new


def test_usage_has_cache_details_only_when_counted() -> None:
    assert usage(10, 5, None) == {"prompt_tokens": 10, "total_tokens": 15, "completion_tokens": 5}
    assert usage(10, 5, 0)["prompt_tokens_details"] == {"cached_tokens": 0}


def test_a_chunk_is_one_sse_event_of_compact_json() -> None:
    raw = chunk("c", 1, "m", [], use=usage(1, 1, None), extra={"system_fingerprint": "vllm-0.26.0-x"})
    assert raw.startswith(b"data: {") and raw.endswith(b"}\n\n") and raw.count(b"\n\n") == 1
    payload = json.loads(raw[len(b"data: ") :])
    assert payload["object"] == "chat.completion.chunk" and payload["system_fingerprint"] == "vllm-0.26.0-x"


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "`messages` must be a non-empty list."),
        ("hello", "`messages` must be a non-empty list."),
        ([{"content": "no role"}], "Each message must be an object with a `role`."),
        (["just text"], "Each message must be an object with a `role`."),
    ],
)
def test_a_chat_request_without_proper_messages_is_a_400_naming_the_field(
    messages: object, message: str
) -> None:
    with pytest.raises(RequestInvalid) as refused:
        render_chat(messages, None)
    assert (refused.value.message, refused.value.param) == (message, "messages")


def test_a_chat_prompt_is_rendered_with_its_tools_and_its_last_question() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    parts = [{"type": "text", "text": "Weather"}, {"type": "text", "text": " in Paris?"}]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": parts},
                {"role": "assistant", "content": None}]  # fmt: skip
    prompt = render_chat(messages, tools)
    assert prompt.text.startswith('<|im_start|>system\n# Tools\n[{"type": "function"')
    assert "<|im_start|>user\nWeather in Paris?<|im_end|>" in prompt.text
    assert prompt.text.endswith("<|im_start|>assistant\n")
    assert (prompt.question, prompt.last_role) == ("Weather in Paris?", "assistant") and prompt.ids
    assert message_text(42) == "42" and message_text(None) == ""


def test_a_completion_prompt_is_text_or_token_ids_and_one_at_a_time() -> None:
    assert render_completion("Once upon").question == "Once upon"
    ids = render_completion([101, 7592, 102])
    assert ids.ids == [101, 7592, 102] and ids.text == "101 7592 102"
    assert render_completion(["only one"]).text == "only one"
    with pytest.raises(RequestInvalid, match="one prompt per request"):
        render_completion(["a", "b"])
    with pytest.raises(RequestInvalid, match="a string or a list of token ids"):
        render_completion({"text": "x"})


def test_greedy_or_seeded_requests_repeat_and_sampled_ones_do_not() -> None:
    prompt = render_completion("Once upon")
    greedy = seed_for(prompt, {"temperature": 0})
    assert greedy is not None and greedy == seed_for(prompt, {"temperature": 0.0})
    assert seed_for(prompt, {"temperature": 0.8, "seed": 7}) == seed_for(
        prompt, {"temperature": 0.2, "seed": 7}
    )
    assert seed_for(prompt, {"temperature": 0.8, "seed": 7}) != seed_for(
        prompt, {"temperature": 0.8, "seed": 8}
    )
    assert seed_for(prompt, {"temperature": 0.8}) is None and seed_for(prompt, {}) is None
