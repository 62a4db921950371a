"""Per-request measurements, computed from one streamed exchange (formulas in docs/bench.md).

    TTFT   = first output event (reasoning included) - send
    TTFC   = first content event (reasoning excluded) - send
    gaps   = differences between consecutive output events
    rho    = (completion_tokens - 1) / (events - 1)     tokens per event (1 unless spec decode)
    ITL    = gap / rho; its median and p90 per request
    decode = 1 / ITL median                               tokens/s, prefill never inside
    E2E    = end of stream - send

Token counts come from `usage` (never from counting deltas); reasoning tokens from
`completion_tokens_details.reasoning_tokens` when present, else by the reasoning events' share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.bench import repetition
from launcher.bench.exchange import Exchange, Tag
from launcher.bench.sse import StreamView, read_stream
from launcher.bench.stats import diffs, percentile


@dataclass(frozen=True, slots=True)
class RequestRecord:
    tag: Tag
    request_id: str
    response_id: str | None
    status: int
    error: str | None
    t_send: float
    event_times: tuple[float, ...]
    ttft_s: float | None
    ttfc_s: float | None
    e2e_s: float
    itl_median_s: float | None
    itl_p90_s: float | None
    decode_tok_s: float | None
    output_tokens: int | None
    tokens_from_usage: bool
    reasoning_tokens: int
    answer_tokens: int
    prompt_tokens: int | None
    cached_tokens: int | None
    finish_reason: str | None
    content: str
    reasoning: str
    tool_call_deltas: int
    content_score: float | None
    reasoning_score: float | None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200

    @property
    def empty_answer(self) -> bool:
        """No answer text and no tool call: the reasoning (or nothing) took the whole budget."""
        return self.ok and not self.content.strip() and self.tool_call_deltas == 0

    @property
    def degenerate(self) -> bool:
        return repetition.is_degenerate(self.content_score)

    def as_json(self) -> dict[str, Any]:
        base = self.event_times[0] if self.event_times else self.t_send
        return {
            "phase": str(self.tag.phase),
            "context": self.tag.context,
            "concurrency": self.tag.concurrency,
            "round": self.tag.round,
            "prompt": self.tag.prompt,
            "copy": self.tag.copy,
            "request_id": self.request_id,
            "response_id": self.response_id,
            "status": self.status,
            "error": self.error,
            "t_send_mono": self.t_send,
            "ttft_s": self.ttft_s,
            "ttfc_s": self.ttfc_s,
            "e2e_s": self.e2e_s,
            "itl_median_s": self.itl_median_s,
            "itl_p90_s": self.itl_p90_s,
            "decode_tok_s": self.decode_tok_s,
            "output_tokens": self.output_tokens,
            "tokens_from_usage": self.tokens_from_usage,
            "reasoning_tokens": self.reasoning_tokens,
            "answer_tokens": self.answer_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "finish_reason": self.finish_reason,
            "empty_answer": self.empty_answer,
            "content_score": self.content_score,
            "reasoning_score": self.reasoning_score,
            "events": len(self.event_times),
            "event_offsets_s": [round(t - base, 6) for t in self.event_times],
            "content": self.content,
            "reasoning": self.reasoning,
        }


def _usage_int(usage: dict[str, Any] | None, *path: str) -> int | None:
    node: Any = usage
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return int(node) if isinstance(node, int | float) else None


def split_reasoning(view: StreamView, output: int) -> int:
    """Reasoning tokens: the server's count if given, else the reasoning events' share of output."""
    given = _usage_int(view.usage, "completion_tokens_details", "reasoning_tokens")
    if given is not None:
        return given
    shown = view.reasoning_events + view.content_events
    return round(output * view.reasoning_events / shown) if shown else 0


def itl_stats(times: list[float], output_tokens: int) -> tuple[float | None, float | None, float | None]:
    """(ITL median, ITL p90, decode tok/s) from output-event times and the usage token count."""
    gaps = diffs(times)
    if not gaps:
        return None, None, None
    rho = (output_tokens - 1) / len(gaps) if output_tokens > 1 else 1.0
    rho = max(rho, 1.0)
    per_token = [g / rho for g in gaps]
    mid = percentile(per_token, 50)
    return mid, percentile(per_token, 90), (1.0 / mid if mid else None)


def build_record(exchange: Exchange) -> RequestRecord:
    view = read_stream(exchange.chunks) if exchange.status == 200 else StreamView()
    error = exchange.error or (view.error if exchange.status == 200 else None)
    times = view.event_times
    usage_tokens = _usage_int(view.usage, "completion_tokens")
    output = usage_tokens if usage_tokens is not None else len(times)
    reasoning = min(split_reasoning(view, output), output)
    itl_mid, itl_p90, decode = itl_stats(times, output)
    content, thinking = view.content_text, view.reasoning_text
    return RequestRecord(
        tag=exchange.tag,
        request_id=exchange.request_id,
        response_id=view.response_id,
        status=exchange.status,
        error=error,
        t_send=exchange.t_send,
        event_times=tuple(times),
        ttft_s=times[0] - exchange.t_send if times else None,
        ttfc_s=view.first_content_time - exchange.t_send if view.first_content_time is not None else None,
        e2e_s=exchange.t_end - exchange.t_send,
        itl_median_s=itl_mid,
        itl_p90_s=itl_p90,
        decode_tok_s=decode,
        output_tokens=output if exchange.status == 200 else None,
        tokens_from_usage=usage_tokens is not None,
        reasoning_tokens=reasoning,
        answer_tokens=output - reasoning,
        prompt_tokens=_usage_int(view.usage, "prompt_tokens"),
        cached_tokens=_usage_int(view.usage, "prompt_tokens_details", "cached_tokens"),
        finish_reason=view.finish_reason,
        content=content,
        reasoning=thinking,
        tool_call_deltas=view.tool_call_deltas,
        content_score=repetition.distinct_ngram_ratio(content),
        reasoning_score=repetition.distinct_ngram_ratio(thinking),
    )
