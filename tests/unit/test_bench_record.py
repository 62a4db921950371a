"""Per-request measurements from a streamed reply: TTFT vs TTFC, ITL, tokens from usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.bench.exchange import Exchange, Phase, Tag
from launcher.bench.record import build_record
from launcher.bench.sse import read_stream

TAG = Tag(Phase.TIMED, "short", 1, 1, 0)


def event(
    delta: dict[str, object] | None = None,
    finish: str | None = None,
    usage: dict[str, object] | None = None,
    choices: bool = True,
) -> bytes:
    body: dict[str, object] = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "m"}
    body["choices"] = (
        [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}] if choices else []
    )
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def stream(events: list[tuple[float, bytes]], t_send: float = 100.0, status: int = 200) -> Exchange:
    end = events[-1][0] if events else t_send
    return Exchange(TAG, "r1", t_send, end, status, tuple(events))


def reasoning_reply(usage: dict[str, object]) -> Exchange:
    return stream(
        [
            (100.010, event({"role": "assistant", "content": ""})),  # role chunk: not a token
            (100.200, event({"reasoning": "Let"})),
            (100.210, event({"reasoning": " me"})),
            (100.220, event({"reasoning": " think"})),
            (100.240, event({"content": "Forty"})),  # `</think>` rode with this one
            (100.250, event({"content": " two"})),
            (100.260, event({"content": ""}, finish="stop")),  # the EOS token's chunk
            (100.261, event(usage=usage, choices=False) + b"data: [DONE]\n\n"),
        ]
    )


def test_ttft_counts_reasoning_and_ttfc_waits_for_content() -> None:
    record = build_record(reasoning_reply({"prompt_tokens": 20, "completion_tokens": 7}))
    assert record.ttft_s == pytest.approx(0.200)
    assert record.ttfc_s == pytest.approx(0.240)
    assert record.e2e_s == pytest.approx(0.261)
    assert len(record.event_times) == 6


def test_tokens_come_from_usage_and_reasoning_splits_by_event_share() -> None:
    record = build_record(reasoning_reply({"prompt_tokens": 20, "completion_tokens": 7}))
    assert record.output_tokens == 7 and record.tokens_from_usage
    assert record.reasoning_tokens == round(7 * 3 / 5) and record.answer_tokens == 7 - 4
    assert record.content == "Forty two" and record.reasoning == "Let me think"


def test_the_servers_reasoning_count_wins_when_given() -> None:
    usage = {
        "prompt_tokens": 20,
        "completion_tokens": 7,
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    assert build_record(reasoning_reply(usage)).reasoning_tokens == 4


def test_itl_uses_event_gaps_scaled_by_tokens_per_event() -> None:
    record = build_record(reasoning_reply({"completion_tokens": 7}))
    # gaps 10, 10, 20, 10, 10 ms; rho = (7 - 1) / 5 = 1.2 tokens per event
    assert record.itl_median_s == pytest.approx(0.010 / 1.2)
    assert record.decode_tok_s == pytest.approx(1.2 / 0.010)
    assert record.itl_p90_s == pytest.approx(0.016 / 1.2)


def test_prefill_is_never_part_of_the_decode_rate() -> None:
    slow_prefill = stream(
        [(108.0, event({"content": "a"}))]
        + [(108.0 + 0.02 * i, event({"content": " b"})) for i in range(1, 11)]
        + [(108.3, event(usage={"completion_tokens": 11}, choices=False) + b"data: [DONE]\n\n")]
    )
    record = build_record(slow_prefill)
    assert record.ttft_s == pytest.approx(8.0)
    assert record.decode_tok_s == pytest.approx(50.0)  # not 11 tokens / 8.3 s


def test_without_usage_event_counts_stand_in_and_say_so() -> None:
    record = build_record(
        stream(
            [
                (100.1, event({"content": "a"})),
                (100.2, event({"content": "b"}, finish="stop")),
                (100.2, b"data: [DONE]\n\n"),
            ]
        )
    )
    assert record.output_tokens == 2 and not record.tokens_from_usage


def test_events_split_across_network_chunks_take_the_completing_chunks_time() -> None:
    whole = event({"content": "Hello"}) + event({"content": " world"}, finish="length")
    cut = len(event({"content": "Hello"})) - 3
    view = read_stream(
        [(1.0, whole[:cut]), (2.0, whole[cut:].replace(b"\n\n", b"\r\n\r\n") + b"data: [DONE]\n\n")]
    )
    assert view.event_times == [2.0, 2.0] and view.content_text == "Hello world" and view.done


def test_empty_answer_when_reasoning_took_the_whole_budget() -> None:
    record = build_record(
        stream(
            [
                (100.1, event({"reasoning": "Hmm"})),
                (100.2, event({"reasoning": " so"}, finish="length")),
                (100.2, event(usage={"completion_tokens": 2}, choices=False) + b"data: [DONE]\n\n"),
            ]
        )
    )
    assert record.empty_answer and record.finish_reason == "length" and record.ttfc_s is None


def test_errors_are_recorded_not_raised() -> None:
    cut = build_record(stream([(100.1, event({"content": "a"}))]))
    assert not cut.ok and "DONE" in (cut.error or "")
    engine = build_record(
        stream(
            [
                (100.1, b'data: {"error": {"message": "EngineCore encountered an issue."}}\n\n'),
                (100.1, b"data: [DONE]\n\n"),
            ]
        )
    )
    assert engine.error == "EngineCore encountered an issue."
    refused = build_record(Exchange(TAG, "r2", 1.0, 1.1, 400, (), "HTTP 400: too long"))
    assert not refused.ok and refused.output_tokens is None and not refused.empty_answer


DATA = Path(__file__).resolve().parents[1] / "data" / "bench"


def test_a_real_vllm_stream_counts_every_step_including_empty_text_chunks() -> None:
    """Recorded from vLLM 0.26.0 (tests/data/bench/README.md): byte-level tokens that are not valid
    UTF-8 yet arrive as `"content": ""`; each is a decode step, so events = completion tokens."""
    raw = (DATA / "vllm-0.26.0-tiny-stream.sse").read_bytes()
    record = build_record(
        stream(
            [(200.0 + i * 0.001, raw[i * 500 : (i + 1) * 500]) for i in range(len(raw) // 500 + 1)],
            t_send=199.99,
        )
    )
    assert record.ok and record.output_tokens == 24 and record.tokens_from_usage
    assert len(record.event_times) == 24  # not the 16 chunks whose text is non-empty
    assert record.finish_reason == "length" and record.prompt_tokens == 32
    assert record.ttft_s is not None and record.ttfc_s is not None and record.ttfc_s > record.ttft_s


def test_the_real_streams_first_two_steps_had_no_visible_text() -> None:
    view = read_stream([(1.0, (DATA / "vllm-0.26.0-tiny-stream.sse").read_bytes())])
    assert view.content_events < len(view.event_times)
    assert view.response_id is not None and view.response_id.startswith("chatcmpl-")
