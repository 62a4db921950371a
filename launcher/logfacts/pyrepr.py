"""Python reprs printed by vLLM (the `non-default args` dict, old `args: Namespace(...)`), read safely.

Only `ast.literal_eval` and `ast.parse` are used, never `eval`: a log is untrusted text. Values that
are not literals (`<CUDAGraphMode.FULL: 2>`, `PosixPath('/x')`, `LoadFormat.AUTO`) are kept as their
source text so one odd value does not lose the whole dict.
"""

from __future__ import annotations

import ast
import re
from typing import Any

_ANGLE = re.compile(r"<([^<>]*)>")
_MAX_REPR = 1_000_000  # a real args dict is a few KB; refuse pathological input


def parse_dict(text: str) -> dict[str, Any] | None:
    """`{'port': 8100, 'served_model_name': ['qwen3-8b']}` → dict; None when it is not a dict."""
    inner = _outer(text, "{", "}")
    if inner is None:
        return None
    for candidate in (inner, _ANGLE.sub(lambda m: repr(m.group(1)), inner)):
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = None
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    return _parse_entries(inner)


def parse_namespace(text: str) -> dict[str, Any] | None:
    """`Namespace(port=8000, tensor_parallel_size=2, ...)` → dict of literal values (others as text)."""
    inner = _outer(text, "(", ")")
    if inner is None or not inner.startswith("Namespace("):
        return None
    cleaned = _ANGLE.sub(lambda m: repr(m.group(1)), inner)
    try:
        tree = ast.parse(cleaned, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    call = tree.body
    if not isinstance(call, ast.Call):
        return None
    return {kw.arg: _literal(kw.value, cleaned) for kw in call.keywords if kw.arg}


def value_after(text: str, key: str) -> str | None:
    """The source text of `key=VALUE` in a config repr, brackets balanced: `X(a=1, b=(2, 3))`."""
    start = text.find(key + "=")
    if start < 0:
        return None
    i = start + len(key) + 1
    depth = 0
    quote = ""
    for j in range(i, len(text)):
        ch = text[j]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return text[i:j].strip()
            depth -= 1
        elif ch == "," and depth == 0:
            return text[i:j].strip()
    return text[i:].strip()


def _outer(text: str, open_ch: str, close_ch: str) -> str | None:
    """The text from the first `open_ch` to its matching `close_ch` (trailing noise dropped)."""
    text = text.strip()
    if len(text) > _MAX_REPR:
        return None
    start = text.find(open_ch)
    end = text.rfind(close_ch)
    if start < 0 or end < start:
        return None
    return text[: end + 1] if open_ch == "(" else text[start : end + 1]


def _literal(node: ast.expr, source: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ast.get_source_segment(source, node)


def _parse_entries(text: str) -> dict[str, Any] | None:
    """Last resort for a dict with a non-literal value: parse it as a call's keywords would be."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    node = tree.body
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant):
            out[str(key.value)] = _literal(value, text)
    return out
