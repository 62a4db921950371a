"""Tool calling as vLLM 0.33 gates it (vllm-facts.md §5.5, §7) and a model that calls a fitting tool.

The request checks come first (protocol validators, then the server's parser gate); then, for a
request that may call, the simulated model picks the tool whose name/description shares words
with the question (else the first one) and fills the required arguments with values of the right
JSON type. Faults: malformed arguments, a wrong function name, or the call written as plain text.
"""

from __future__ import annotations

import json
import random
import re
import secrets
from dataclasses import dataclass
from typing import Any

CORRECT_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
_WORD = re.compile(r"[A-Za-z]{3,}")
_NO_TOOL = re.compile(r"^\s*(hi|hello|hey|thanks|thank you|say\b|你好|谢谢)", re.IGNORECASE)
_PLACE = re.compile(r"\b(?:in|at|for|near)\s+([A-Z][a-zA-Z]+(?:\s[A-Z][a-zA-Z]+)?)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class RequestInvalid(Exception):
    """HTTP 400 with vLLM's message (and the request field it names)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class PlannedCall:
    id: str
    name: str
    arguments: str


def validate_tool_usage(body: dict[str, Any]) -> None:
    """The `check_tool_usage` validator of the chat request (runs before anything else)."""
    if body.get("tools") == []:
        raise RequestInvalid(
            "`tools` must not be an empty array. Either provide at least one tool or omit the "
            "field entirely.",
            "tools",
        )
    if "tool_choice" not in body and body.get("tools"):
        body["tool_choice"] = "auto"
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return
    if body.get("tools") is None:
        raise RequestInvalid("When using `tool_choice`, `tools` must be set.", "tool_choice")
    if choice not in ("auto", "required") and not isinstance(choice, dict):
        raise RequestInvalid(
            f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or '
            '"required" are supported.',
            "tool_choice",
        )
    if isinstance(choice, dict):
        _check_named_choice(choice, body["tools"])


def _check_named_choice(choice: dict[str, Any], tools: list[Any]) -> None:
    """A named `tool_choice`: a `function` object with a `name` that one of the `tools` has."""
    function = choice.get("function")
    if not isinstance(function, dict):
        raise RequestInvalid(
            f"Invalid value for `function`: `{function}` in `tool_choice`! {CORRECT_USAGE}",
            "tool_choice.function",
        )
    if "name" not in function:
        raise RequestInvalid(
            f"Expected field `name` in `function` in `tool_choice`! {CORRECT_USAGE}",
            "tool_choice.function.name",
        )
    names = [t.get("function", {}).get("name") for t in tools]
    if function["name"] not in names:
        raise RequestInvalid(
            "The tool specified in `tool_choice` does not match any of the specified `tools`",
            "tool_choice",
        )


def check_server_support(choice: Any, parser_ready: bool, auto_tools: bool) -> str | None:
    """The 400 vLLM returns when no tool parser exists (needs both flags, vllm-facts.md §5.5)."""
    if parser_ready or choice in (None, "none"):
        return None
    if choice == "auto" and not auto_tools:
        return '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    desc = f'function "{choice["function"]["name"]}"' if isinstance(choice, dict) else f'"{choice}"'
    return f"tool_choice={desc} requires --tool-call-parser to be set"


def plan_calls(
    tools: list[dict[str, Any]], choice: Any, question: str, last_role: str, rng: random.Random
) -> list[PlannedCall]:
    """The calls the model makes; empty means it answers in text."""
    if choice in (None, "none") or not tools:
        return []
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        tool = next(t for t in tools if t.get("function", {}).get("name") == name)
    else:
        if choice == "auto" and (last_role == "tool" or _NO_TOOL.match(question)):
            return []
        tool = _fitting(tools, question)
    function = tool.get("function", {})
    args = arguments_for(function.get("parameters") or {}, question, rng)
    return [
        PlannedCall(
            "chatcmpl-tool-" + secrets.token_hex(8),
            function.get("name", "tool"),
            json.dumps(args, ensure_ascii=False),
        )
    ]


def apply_fault(calls: list[PlannedCall], fault: str | None) -> list[PlannedCall]:
    if not calls or fault in (None, "text"):
        return calls
    if fault == "malformed":
        return [PlannedCall(c.id, c.name, c.arguments.rstrip("}") + ', "') for c in calls]
    return [PlannedCall(c.id, c.name + "_unknown", c.arguments) for c in calls]


def as_text(calls: list[PlannedCall]) -> str:
    """The `text` fault: the model writes the call as prose-ish JSON the parser does not catch."""
    return " ".join(json.dumps({"name": c.name, "arguments": json.loads(c.arguments)}) for c in calls)


def _fitting(tools: list[dict[str, Any]], question: str) -> dict[str, Any]:
    asked = {w.lower() for w in _WORD.findall(question)}
    best, best_score = tools[0], 0
    for tool in tools:
        function = tool.get("function", {})
        words = {w.lower() for w in _WORD.findall(function.get("name", "").replace("_", " "))}
        words |= {w.lower() for w in _WORD.findall(function.get("description") or "")}
        score = len(asked & words)
        if score > best_score:
            best, best_score = tool, score
    return best


def arguments_for(schema: dict[str, Any], question: str, rng: random.Random) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties") or {}
    wanted = schema.get("required") or list(props)
    return {name: value_for(name, props.get(name) or {}, question, rng) for name in wanted}


def value_for(name: str, schema: dict[str, Any], question: str, rng: random.Random) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    number = _NUMBER.search(question)
    if kind == "integer":
        return int(float(number.group(0))) if number else 1
    if kind == "number":
        return float(number.group(0)) if number else 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return [value_for(name, schema.get("items") or {}, question, rng)]
    if kind == "object":
        return arguments_for(schema, question, rng)
    return _string_for(name, question)


def _string_for(name: str, question: str) -> str:
    low = name.lower()
    place = _PLACE.search(question)
    if any(k in low for k in ("location", "city", "place", "country", "where")):
        return place.group(1) if place else "Paris"
    if "date" in low:
        return "2026-01-01"
    if "unit" in low:
        return "celsius"
    if any(k in low for k in ("query", "text", "prompt", "question", "q", "input", "message")):
        return " ".join(question.split())[:120] or "example"
    return place.group(1) if place else "example"
