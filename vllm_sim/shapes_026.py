"""vLLM 0.26.0's reply bodies: the keys it adds to the 0.33 shapes of `openai_api` and where, as the
real replies recorded them (tests/data/real-vllm-0.26/eager/*.json, *.sse)."""

from __future__ import annotations

from typing import Any


def _ordered(source: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """`keys` in this order (None where the source lacks one), then any other key of the source."""
    out = {key: source.get(key) for key in keys}
    out.update({k: v for k, v in source.items() if k not in out})
    return out


CHAT_CHOICE = ("index", "message", "logprobs", "finish_reason", "stop_reason", "token_ids", "routed_experts")
TEXT_CHOICE = (
    "index",
    "text",
    "logprobs",
    "finish_reason",
    "stop_reason",
    "token_ids",
    "prompt_logprobs",
    "prompt_token_ids",
    "routed_experts",
)
USAGE = ("prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details")
CHAT_TAIL = ("prompt_logprobs", "prompt_token_ids", "prompt_text", "kv_transfer_params", "ec_transfer_params")
TEXT_TAIL = ("kv_transfer_params", "ec_transfer_params")
HEAD = ("id", "object", "created", "model", "choices", "service_tier", "system_fingerprint", "usage")


def body_026(body: dict[str, Any], fingerprint: str, chat: bool) -> dict[str, Any]:
    """A non-streamed chat or text completion as 0.26.0 sends it: its fingerprint, null
    `routed_experts`, `prompt_tokens_details`, `ec_transfer_params` and `metrics`."""
    choice_keys = CHAT_CHOICE if chat else TEXT_CHOICE
    out = dict(body, system_fingerprint=fingerprint)
    out["choices"] = [_ordered(c, choice_keys) for c in body["choices"]]
    out["usage"] = _ordered(body["usage"], USAGE)
    return _ordered(out, (*HEAD, *(CHAT_TAIL if chat else TEXT_TAIL), "metrics"))


def text_chunk_choice(choice: dict[str, Any]) -> dict[str, Any]:
    """A streamed text-completion choice: 0.26.0 adds null `prompt_token_ids` and `token_ids`."""
    return _ordered(
        choice, ("index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_token_ids", "token_ids")
    )


def chat_delta_026(delta: dict[str, Any]) -> dict[str, Any]:
    """A streamed tool-call delta as 0.26.0 sends it: `"content": null` first, and a call's opening
    entry ordered id, type, index, function (record/eager/chat-hermes-broken.sse)."""
    if "tool_calls" not in delta:
        return delta
    calls = [
        _ordered(c, ("id", "type", "index", "function")) if "id" in c else c for c in delta["tool_calls"]
    ]
    return _ordered(dict(delta, tool_calls=calls), ("content", "tool_calls"))
