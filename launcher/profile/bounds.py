"""How big and how deep a value from the operator may be: profiles, `launch set`'s KEY=VALUE, JSON flags.

Python's parsers recurse once per nesting level (tomllib, json, tomlkit's writer): a value nested
50,000 deep was a RecursionError and exit 70 (issue 33). No real vLLM setting nests deeper than a
few levels (`compilation_config.pass_config...`) or is longer than a few KiB, so the bounds below are
far above any real profile and far below what could hurt: a value beyond them is refused (exit 2)
naming its key, before it is parsed when it is text, and with an iterative walk once it is data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from launcher.errors import BadInput

MAX_DEPTH = 16  # tables and arrays inside one another, the profile's own tables included
MAX_TEXT_CHARS = 64 * 1024  # one string, or one KEY=VALUE's value as typed
MAX_ITEMS = 4096  # entries of one table or array
MAX_PROFILE_BYTES = 1024 * 1024  # one profile file


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of TOML or JSON text, strings and comments skipped (no parser
    involved): closers in a `# ]]]` comment must not hide the openers after it."""
    depth = deepest = 0
    for ch in _outside_strings_and_comments(text):
        if ch in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]})":
            depth -= 1
    return deepest


def _outside_strings_and_comments(text: str) -> Iterator[str]:
    quote = ""
    escaped = comment = False
    for ch in text:
        if comment:
            comment = ch != "\n"
        elif quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            comment = True
        else:
            yield ch


def check_text(text: str, what: str) -> None:
    """Refuse text too long or nested too deep to be a setting, before any parser sees it."""
    depth = nesting_depth(text[: 4 * MAX_TEXT_CHARS])  # a bracket bomb is named for what it is
    if depth > MAX_DEPTH:
        raise BadInput(f"{what}: nested {depth:,} levels deep, more than a setting holds ({MAX_DEPTH})")
    if len(text) > MAX_TEXT_CHARS:
        raise BadInput(f"{what}: {len(text):,} characters, more than a setting holds ({MAX_TEXT_CHARS:,})")


def value_problem(value: Any, start_depth: int = 0) -> str | None:
    """Why a parsed value is out of bounds (`args.x.y: nested 17 levels deep`), else None. Iterative."""
    stack: list[tuple[str, Any, int]] = [("", value, start_depth)]
    while stack:
        key, node, depth = stack.pop()
        if isinstance(node, str) and len(node) > MAX_TEXT_CHARS:
            return f"{key or 'value'}: a string of {len(node):,} characters (at most {MAX_TEXT_CHARS:,})"
        if not isinstance(node, dict | list):
            continue
        if depth + 1 > MAX_DEPTH:
            return f"{key or 'value'}: nested more than {MAX_DEPTH} levels deep"
        if len(node) > MAX_ITEMS:
            return f"{key or 'value'}: {len(node):,} entries (at most {MAX_ITEMS:,})"
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for name, child in items:
            stack.append((f"{key}.{name}" if key else str(name), child, depth + 1))
    return None


def loads_json(text: str) -> Any:
    """`json.loads` for a value from the operator; ValueError (never RecursionError) when out of bounds."""
    if len(text) > MAX_TEXT_CHARS or nesting_depth(text) > MAX_DEPTH:
        raise ValueError("too long or nested too deep to be a setting")
    return json.loads(text)
