"""Request parsing and response shapes of vLLM 0.33's OpenAI-compatible API (vllm-facts.md §7).

Non-streaming bodies carry every field (nulls included); stream chunks are `exclude_unset`: only
fields vLLM sets appear. Ids: `chatcmpl-<X-Request-Id or uuid hex>`, tool calls
`chatcmpl-tool-<16 hex>`.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from vllm_sim import tokenizer
from vllm_sim.generation import Channel, Plan, Tok
from vllm_sim.toolcalls import RequestInvalid


@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    ids: list[int]
    question: str
    last_role: str


def message_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def render_chat(messages: Any, tools: list[dict[str, Any]] | None) -> Prompt:
    """A ChatML-like template: what the token counts and prefix-cache hashes are taken over."""
    if not isinstance(messages, list) or not messages:
        raise RequestInvalid("`messages` must be a non-empty list.", "messages")
    parts: list[str] = []
    if tools:
        parts.append("<|im_start|>system\n# Tools\n" + json.dumps(tools, ensure_ascii=False) + "<|im_end|>\n")
    question, last_role = "", "user"
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise RequestInvalid("Each message must be an object with a `role`.", "messages")
        text = message_text(message.get("content"))
        parts.append(f"<|im_start|>{message['role']}\n{text}<|im_end|>\n")
        last_role = str(message["role"])
        if message["role"] == "user":
            question = text
    parts.append("<|im_start|>assistant\n")
    rendered = "".join(parts)
    return Prompt(rendered, tokenizer.encode(rendered) or [0], question, last_role)


def render_completion(prompt: Any) -> Prompt:
    if isinstance(prompt, list):
        if prompt and all(isinstance(t, int) for t in prompt):
            return Prompt(" ".join(map(str, prompt)), list(prompt), "", "user")
        if len(prompt) != 1:
            raise RequestInvalid("vllm-sim serves one prompt per request.", "prompt")
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise RequestInvalid("`prompt` must be a string or a list of token ids.", "prompt")
    return Prompt(prompt, tokenizer.encode(prompt) or [0], prompt, "user")


def seed_for(prompt: Prompt, body: dict[str, Any]) -> int | None:
    """Greedy (temperature 0) or seeded requests repeat exactly; others vary."""
    seed, temperature = body.get("seed"), body.get("temperature")
    if seed is None and temperature not in (0, 0.0):
        return None
    digest = hashlib.blake2b(f"{prompt.text}\x1f{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def request_id(prefix: str, header: str | None, hex_digits: int = 32) -> str:
    """`hex_digits`: 0.26.0 answered `chatcmpl-96a80d4263255b00` (16), 0.33 a full uuid hex."""
    return f"{prefix}-{header}" if header else f"{prefix}-{uuid.uuid4().hex[:hex_digits]}"


def usage(prompt_tokens: int, completion: int, cached: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion,
        "completion_tokens": completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def error_body(message: str, err_type: str, code: int, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def joined(tokens: tuple[Tok, ...] | list[Tok], channel: Channel) -> str:
    return "".join(t.text for t in tokens if t.channel == channel)


def tool_calls_full(plan: Plan) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in plan.calls
    ]


def chat_message(plan: Plan, reasoning_field: str) -> dict[str, Any]:
    content = joined(plan.tokens, Channel.CONTENT)
    reasoning = joined(plan.tokens, Channel.REASONING)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content if content or not (plan.calls or reasoning) else None,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
    }
    if plan.calls:
        message["tool_calls"] = tool_calls_full(plan)
    message[reasoning_field] = reasoning or None
    return message


def chat_response(
    rid: str, model: str, plan: Plan, use: dict[str, Any], reasoning_field: str
) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": chat_message(plan, reasoning_field),
        "logprobs": None,
        "finish_reason": plan.finish_reason,
        "stop_reason": plan.stop_reason,
        "token_ids": None,
    }
    return {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": use,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "kv_transfer_params": None,
    }


def chat_delta(tokens: list[Tok], plan: Plan, reasoning_field: str) -> dict[str, Any] | None:
    """The delta one engine step produces, or None when it shows nothing (hidden tokens only)."""
    delta: dict[str, Any] = {}
    reasoning = joined(tokens, Channel.REASONING)
    content = joined(tokens, Channel.CONTENT)
    if reasoning:
        delta[reasoning_field] = reasoning
    if content:
        delta["content"] = content
    calls: dict[int, dict[str, Any]] = {}
    for tok in tokens:
        if tok.channel == Channel.TOOL_NAME:
            call = plan.calls[tok.call]
            calls[tok.call] = {
                "index": tok.call,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name},
            }
        elif tok.channel == Channel.TOOL_ARGS:
            entry = calls.setdefault(tok.call, {"index": tok.call, "function": {}})
            entry["function"]["arguments"] = entry["function"].get("arguments", "") + tok.text
    if calls:
        delta["tool_calls"] = [calls[i] for i in sorted(calls)]
    return delta or None


def chunk(
    rid: str,
    created: int,
    model: str,
    choices: list[dict[str, Any]],
    obj: str = "chat.completion.chunk",
    use: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    body: dict[str, Any] = {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}
    if use is not None:
        body["usage"] = use
    body.update(extra or {})
    return b"data: " + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


def fingerprint(version: str, model: str) -> str:
    """`vllm-0.26.0-d6dda990`: the shape 0.26.0 sent on its usage chunk (the hash is ours)."""
    return f"vllm-{version}-{hashlib.blake2b(model.encode(), digest_size=4).hexdigest()}"


def completion_response(rid: str, model: str, plan: Plan, use: dict[str, Any]) -> dict[str, Any]:
    choice = {
        "index": 0,
        "text": joined(plan.tokens, Channel.CONTENT),
        "logprobs": None,
        "finish_reason": plan.finish_reason,
        "stop_reason": plan.stop_reason,
        "prompt_logprobs": None,
    }
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": use,
        "kv_transfer_params": None,
    }
