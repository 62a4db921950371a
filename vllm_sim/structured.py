"""Structured output that pins the whole answer: a `structured_outputs.regex` that is a literal text
(what record-026.sh used to force a `<tool_call>` hermes cannot read) makes the model write exactly
that text; hermes then parses it as vLLM 0.26.0 does (hermes_tool_parser.py:80-120)."""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from vllm_sim.toolcalls import PlannedCall

_META = set(".^$*+?()[]{}|")
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def forced_text(body: dict[str, Any]) -> str | None:
    """The text a literal regex allows, or None (no regex, or one that allows more than one text)."""
    options = body.get("structured_outputs")
    regex = options.get("regex") if isinstance(options, dict) else None
    return _literal(regex) if isinstance(regex, str) else None


def _literal(regex: str) -> str | None:
    """The one text `regex` matches when it holds no operator (punctuation may be escaped), else None."""
    out, escaped = [], False
    for ch in regex:
        if escaped and ch.isascii() and ch.isalnum():
            return None  # `\d`, `\w`, `\b`, `\1`, `\n`…: a class, an anchor or a code, not that letter
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in _META:
            return None
        else:
            out.append(ch)
    return None if escaped else "".join(out)  # a trailing `\` is no regex at all


_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"\s*,\s*"arguments"\s*:\s*(.*)\}\s*$', re.DOTALL)


def hermes_raw_calls(text: str) -> list[PlannedCall]:
    """What hermes' streaming parser sends for calls it cannot load: the name, then the arguments'
    text as written (`{"city": Paris}` in record/eager/chat-hermes-broken.sse)."""
    calls = []
    for between, open_end in _CALL.findall(text):
        if m := _NAME.search((between or open_end).strip()):
            calls.append(PlannedCall("chatcmpl-tool-" + secrets.token_hex(8), m[1], m[2].strip()))
    return calls


def hermes_calls(text: str) -> list[PlannedCall] | None:
    """The calls hermes reads from `text` ([] when it holds none), None when one does not parse."""
    found = _CALL.findall(text)
    calls = []
    for between, open_end in found:
        try:
            call = json.loads(between or open_end)
            arguments = json.dumps(call["arguments"], ensure_ascii=False)
            calls.append(PlannedCall("chatcmpl-tool-" + secrets.token_hex(8), str(call["name"]), arguments))
        except (ValueError, KeyError, TypeError):
            return None
    return calls
