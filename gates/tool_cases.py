"""The tool-call suite: each case's request, and pure judges of a reply (tested on recorded bodies)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TOOL_NAME = "get_weather"
ASK_WEATHER = "What is the weather in Paris right now? Use the get_weather tool."
ASK_NOTHING = "Say hello to the user in one short sentence. No tool is needed for this."


@dataclass(frozen=True, slots=True)
class ToolCase:
    name: str
    prompt: str
    tool_choice: Any
    expect_call: bool
    stream: bool = False

    def request(self, model: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": self.prompt}],
            "tools": [WEATHER_TOOL],
            "tool_choice": self.tool_choice,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body


CASES: tuple[ToolCase, ...] = (
    ToolCase("auto", ASK_WEATHER, "auto", expect_call=True),
    ToolCase("required", ASK_WEATHER, "required", expect_call=True),
    ToolCase("named", ASK_WEATHER, {"type": "function", "function": {"name": TOOL_NAME}}, expect_call=True),
    ToolCase("no_tool", ASK_NOTHING, "auto", expect_call=False),
    ToolCase("auto_stream", ASK_WEATHER, "auto", expect_call=True, stream=True),
)


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    ok: bool
    why: str
    body: str = ""

    def to_json(self) -> dict[str, Any]:
        body = self.body if len(self.body) <= 2000 else f"{self.body[:1500]} … {self.body[-400:]}"
        return {"ok": self.ok, "why": self.why, "body": body}


@dataclass(slots=True)
class Reply:
    """The parts of an answer the judges look at, from a whole body or assembled from a stream."""

    content: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    calls: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def of_message(cls, message: dict[str, Any], finish_reason: str | None) -> Reply:
        """A whole body's message: its text, reasoning (either field name) and calls."""
        functions = [c.get("function") or {} for c in message.get("tool_calls") or []]
        return cls(
            content=message.get("content") or "",
            reasoning=message.get("reasoning") or message.get("reasoning_content") or "",
            finish_reason=finish_reason,
            calls=[{"name": f.get("name", ""), "arguments": f.get("arguments", "")} for f in functions],
        )


def judge_reply(case: ToolCase, status: int, body: str) -> CaseResult:
    if status != 200:
        return CaseResult(case.name, False, f"HTTP {status or 'no connection'}", body)
    try:
        choice = json.loads(body)["choices"][0]
        message = choice.get("message") or {}
        if not isinstance(message, dict):
            raise TypeError("message")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):  # any shape but vLLM's
        return CaseResult(case.name, False, "the body is not a chat completion", body)
    return _judge(case, Reply.of_message(message, choice.get("finish_reason")), body)


def judge_stream(case: ToolCase, payloads: Iterable[str]) -> CaseResult:
    """Assemble streamed deltas (tool-call arguments arrive in pieces, by index) and judge them."""
    reply = Reply()
    by_index: dict[int, dict[str, str]] = {}
    raw: list[str] = []
    for payload in payloads:
        raw.append(payload)
        if payload.strip() == "[DONE]":
            continue
        try:
            chunk = json.loads(payload)
        except ValueError:
            return CaseResult(case.name, False, "a stream chunk is not JSON", "\n".join(raw))
        try:
            for choice in chunk.get("choices") or []:
                _take_choice(reply, by_index, choice)
        except (AttributeError, TypeError, ValueError):  # any shape but vLLM's
            return CaseResult(
                case.name, False, "a stream chunk is not a chat completion chunk", "\n".join(raw)
            )
    if not raw:
        return CaseResult(case.name, False, "the stream was empty (no connection or no data)")
    reply.calls = [by_index[i] for i in sorted(by_index)]
    return _judge(case, reply, "\n".join(raw))


def _take_choice(reply: Reply, by_index: dict[int, dict[str, str]], choice: dict[str, Any]) -> None:
    """Adds one streamed choice's delta to the reply; a call's pieces join the call of their index."""
    delta = choice.get("delta") or {}
    reply.content += delta.get("content") or ""
    reply.reasoning += delta.get("reasoning") or delta.get("reasoning_content") or ""
    for call in delta.get("tool_calls") or []:
        _add_call_piece(by_index, call)
    if choice.get("finish_reason"):
        reply.finish_reason = choice["finish_reason"]


def _add_call_piece(by_index: dict[int, dict[str, str]], call: dict[str, Any]) -> None:
    slot = by_index.setdefault(int(call.get("index", 0)), {"name": "", "arguments": ""})
    function = call.get("function") or {}
    slot["name"] += function.get("name") or ""
    slot["arguments"] += function.get("arguments") or ""


def _judge(case: ToolCase, reply: Reply, body: str) -> CaseResult:
    budget_spent = reply.finish_reason == "length" and not reply.content.strip() and not reply.calls
    if not case.expect_call:
        return _judge_text_answer(case, reply, body, budget_spent)
    if not reply.calls:
        return CaseResult(case.name, False, _why_no_call(reply, budget_spent), body)
    return _judge_call(case, reply.calls[0], body)


def _judge_text_answer(case: ToolCase, reply: Reply, body: str, budget_spent: bool) -> CaseResult:
    """A question that needs no tool: passed by an answer in text, and only by one."""
    if reply.calls:
        return CaseResult(
            case.name, False, f"called {reply.calls[0]['name']} for a question that needs no tool", body
        )
    if budget_spent and reply.reasoning:
        return CaseResult(case.name, False, "reasoning used the whole budget: no answer text", body)
    if not reply.content.strip():
        return CaseResult(case.name, False, "empty answer", body)
    return CaseResult(case.name, True, "answered in text", "")


def _why_no_call(reply: Reply, budget_spent: bool) -> str:
    """Why a reply that should have called the tool did not: the budget, the parser, the model."""
    if budget_spent and reply.reasoning:
        return "reasoning used the whole budget before any call"
    shown = reply.content.strip()[:80]
    if "</tool_call>" in reply.content and reply.finish_reason != "length":
        # vLLM's hermes parser could not load the call (it logs `Error in extracting tool call
        # from response.`) and returned the model's text as content (0.26.0 hermes_tool_parser.py:117)
        return f"the tool parser could not read the call: it came back as text, not valid JSON: {shown!r}"
    if _begins_a_call(reply.content):
        # Seen on vLLM 0.26 with a random-weight model: `<tool_call>\n{"name": "get_weather",
        # "arguments": {"city"` then whitespace until max_tokens — a call begun, never finished.
        return (
            f"a call was begun in text but never completed (finish_reason={reply.finish_reason}): {shown!r}"
        )
    return f"no tool call; answered in text: {reply.content[:120]!r}"


def _judge_call(case: ToolCase, call: dict[str, str], body: str) -> CaseResult:
    """The first call: the right tool, with arguments that are JSON and match its schema."""
    if call["name"] != TOOL_NAME:
        return CaseResult(case.name, False, f"called {call['name']!r}, expected {TOOL_NAME!r}", body)
    try:
        arguments = json.loads(call["arguments"])
    except ValueError:
        return CaseResult(
            case.name, False, f"arguments are not valid JSON: {call['arguments'][:200]!r}", body
        )
    problem = schema_problem(arguments, WEATHER_TOOL["function"]["parameters"])
    if problem:
        return CaseResult(case.name, False, f"arguments do not match the schema: {problem}", body)
    return CaseResult(case.name, True, f"called {TOOL_NAME}({call['arguments']})", "")


def _begins_a_call(content: str) -> bool:
    text = content.lstrip()
    return "<tool_call>" in text or text.startswith(('{"name"', '[{"name"', '{"function"'))


JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """The subset of JSON Schema a tool's parameters use: object, required, property types, enum."""
    if not isinstance(value, dict):
        return f"expected an object, got {type(value).__name__}"
    for name in schema.get("required", []):
        if name not in value:
            return f"missing required {name!r}"
    properties = schema.get("properties", {})
    for name, item in value.items():
        spec = properties.get(name)
        problem = _property_problem(name, item, spec) if spec is not None else None
        if problem:
            return problem
    return None


def _property_problem(name: str, item: Any, spec: dict[str, Any]) -> str | None:
    kinds = JSON_TYPES.get(spec.get("type", ""), (object,))
    if isinstance(item, bool) and bool not in kinds or not isinstance(item, kinds):
        return f"{name!r} should be {spec.get('type')}, got {item!r}"
    if "enum" in spec and item not in spec["enum"]:
        return f"{name!r} = {item!r} is not one of {spec['enum']}"
    return None
