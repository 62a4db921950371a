"""Edit one profile file in place, keeping its comments and layout: what `launch set` writes.

The edit is done with tomlkit (which keeps comments, blank lines and alignment), and then checked
against the same edit done on plain data with tomllib: if the two disagree, tomlkit misread the
layout and nothing is written. Validation of what the edit *means* (flags, types) is the plan's job.
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.exceptions import ParseError
from tomlkit.items import InlineTable, Item, Table

from launcher.errors import BadInput
from launcher.profile import bounds
from launcher.profile.keys import TOP_LEVEL
from launcher.redact import MASK, is_secret_name, redact_word

# Tables an address may start with; anything else is a key of `[args]`.
TABLES = tuple(s.name for s in TOP_LEVEL if s.type is dict)
SEGMENT_RE = re.compile(r"[A-Za-z0-9_-]+")  # whole segments only (fullmatch): `$` lets "env\n" through
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# A value that is not TOML but has nothing TOML-ish in it is taken as a string: `hermez`, `/models/x`.
BARE_WORD_RE = re.compile(r"""^[^\s\[\]{}"'=,#]+$""")


@dataclass(frozen=True, slots=True)
class Assignment:
    """One `key=value` of the command line: where it goes in the file, and the value."""

    given: str  # as the operator wrote it: "max_num_seqs=16"
    path: tuple[str, ...]  # in the file: ("args", "max_num_seqs")
    value: Any  # as tomllib reads it
    text: str  # as it is written into the file

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def parse_assignment(given: str) -> Assignment:
    """`max_num_seqs=16`, `env.X="0"`, `compilation_config.cudagraph_capture_sizes=[1,2,4]`."""
    key, sep, raw = given.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise BadInput(
            f"{_shown(given)} is not key=value", hint="for example: max_num_seqs=16 or env.VLLM_X=1"
        )
    if len(key) > 256 or key.count(".") >= bounds.MAX_DEPTH:
        raise BadInput(f"{_shown(key)}: not a key (too long, or more than {bounds.MAX_DEPTH} parts)")
    segments = tuple(key.split("."))
    bad = [s for s in segments if not SEGMENT_RE.fullmatch(s)]
    if bad:
        raise BadInput(
            f"{_shown(given)}: {key!r} is not a key (each part: letters, digits, '_' or '-')",
            hint="address [args] with a bare key, other tables as env.NAME, engine.KEY, gates.NAME.KEY",
        )
    if segments[0] not in TABLES:
        segments = ("args", *segments)
    elif len(segments) == 1:
        raise BadInput(
            f"{_shown(given)}: [{key}] is a table; set one key in it", hint=f"for example {key}.KEY=VALUE"
        )
    value = parse_value(given, raw)
    problem = bounds.value_problem(value, start_depth=len(segments))
    if problem is not None:
        raise BadInput(f"{key}: {problem.removeprefix('value: ')}; nothing was changed")
    if segments[0] == "env" and isinstance(value, int | float):  # bool is an int too
        value = raw  # environment values are strings: `env.VLLM_X=1` means "1", as in a shell
    return Assignment(given=given, path=segments, value=value, text=format_value(value))


def _shown(text: str) -> str:
    """An argument as an error quotes it: at most 80 characters (a 1 MB argument is not echoed), the
    value of a secret's key masked (`env.VLLM_API_KEY=***`)."""
    text = redact_word(text)
    return repr(text) if len(text) <= 80 else repr(text[:80]) + f"… ({len(text):,} characters)"


def match_spelling(items: Sequence[Assignment], args_keys: Iterable[str]) -> list[Assignment]:
    """`max-num-seqs=8` where the profile (or a parent) says `max_num_seqs`: use the spelling already
    there, so the file never holds the same flag twice under two names."""
    existing = {key.replace("-", "_"): key for key in args_keys}
    matched = []
    for item in items:
        spelled = existing.get(item.path[1].replace("-", "_")) if item.path[0] == "args" else None
        if spelled is not None and spelled != item.path[1]:
            item = replace(item, path=("args", spelled, *item.path[2:]))
        matched.append(item)
    return matched


def parse_value(given: str, raw: str) -> Any:
    """A TOML value (`16`, `0.3`, `true`, `[1,2]`, `{method="mtp"}`, `"x"`); a bare word is a string."""
    if not raw:
        raise BadInput(f"{_shown(given)}: no value after '='", hint='write an empty string as ""')
    bounds.check_text(raw, f"the value of {_shown(given.partition('=')[0].strip())}")
    if CONTROL_RE.search(raw):
        # `x="a"\n[evil]` parsed as `v = "a"` plus a table nobody asked for, which was dropped
        # silently (issue 42): a value is one line of TOML, whole or refused
        raise BadInput(
            f"{_shown(given)}: the value holds a line break or another control character; a value is "
            "one line of TOML, and the rest would be cut off or read as a new table",
            hint="one KEY=VALUE per argument; quote a value with spaces, as in the shell",
        )
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError as err:
        if BARE_WORD_RE.match(raw):
            return raw
        shown = MASK if is_secret_name(given.partition("=")[0].strip()) else repr(raw)
        raise BadInput(
            f"{_shown(given)}: {shown} is not a TOML value ({err})",
            hint="numbers as 16 or 0.3, switches as true/false, lists as [1,2,4], "
            'tables as {method="mtp"}, text with spaces in quotes (shell-quote the whole argument)',
        ) from err


def format_value(value: Any) -> str:
    """TOML text in the shipped profiles' style: `[1, 2, 4]`, `{ method = "mtp" }`."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        entries = ", ".join(f"{_key_text(k)} = {format_value(v)}" for k, v in value.items())
        return "{ " + entries + " }"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(tomlkit.item(value).as_string())


def apply_assignments(text: str, assignments: Sequence[Assignment], *, where: str = "the profile") -> str:
    """The file text with every assignment made; raises BadInput when one cannot be made."""
    seen: set[tuple[str, ...]] = set()
    for item in assignments:
        if item.path in seen:
            raise BadInput(f"{item.dotted} is given twice", hint="give each key once per call")
        seen.add(item.path)
    try:
        document = tomlkit.parse(text)
        expected = tomllib.loads(text)
    except (ParseError, tomllib.TOMLDecodeError) as err:
        raise BadInput(f"{where}: TOML syntax error: {err}") from err
    for item in assignments:
        _set_data(expected, item)
        _set_document(document, item)
    edited = tomlkit.dumps(document)
    if "\r\n" in text and text.count("\r\n") == text.count("\n"):
        edited = edited.replace("\r\n", "\n").replace("\n", "\r\n")  # new lines follow the file's endings
    if tomllib.loads(edited) != expected:
        keys = ", ".join(a.dotted for a in assignments)
        raise BadInput(
            f"{where}: cannot edit {keys} without disturbing the file's layout; nothing was written",
            hint="edit this file by hand (copy it to a .bak_<tag> first)",
        )
    return edited


def _set_data(data: dict[str, Any], item: Assignment) -> None:
    """The same edit on plain data: the reference the tomlkit edit is checked against."""
    node = data
    for depth, key in enumerate(item.path[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise _not_a_table(item, depth)
        node = child
    node[item.path[-1]] = copy.deepcopy(item.value)


def _set_document(document: tomlkit.TOMLDocument, item: Assignment) -> None:
    container: Container | Table | tomlkit.TOMLDocument = document
    for depth, key in enumerate(item.path[:-1]):
        rest = item.path[depth + 1 :]
        if key not in container:
            _put(container, key, _fresh(item.path[: depth + 1], rest, item.text))
            return
        child = container[key]
        if isinstance(child, InlineTable):
            updated = _set_inline(child, rest, item)
            if updated is not child:
                container[key] = updated
            return
        if not isinstance(child, Table):
            raise _not_a_table(item, depth)
        container = child
    _put(container, item.path[-1], _parse_item(item.text))


def _fresh(prefix: tuple[str, ...], rest: tuple[str, ...], value_text: str) -> Item:
    """A new item at `prefix` holding `rest = value`: a header table (`[env]`, `[gates.NAME]`)
    where profiles use headers, an inline table below that (`{ cudagraph_capture_sizes = [1, 2] }`)."""
    if not _is_header(prefix):
        return _parse_item(_nested_inline(rest, value_text))
    head, tail = rest[0], rest[1:]
    child = _fresh((*prefix, head), tail, value_text) if tail else _parse_item(value_text)
    table = tomlkit.table(is_super_table=isinstance(child, Table))
    table.append(head, child)
    return table


def _is_header(prefix: tuple[str, ...]) -> bool:
    return len(prefix) == 1 or (len(prefix) == 2 and prefix[0] == "gates")


def _set_inline(table: InlineTable, rest: tuple[str, ...], item: Assignment) -> Item:
    """Set inside an inline table, which stays inline; returns the table, or its replacement."""
    key, tail = rest[0], rest[1:]
    if key in table:
        child = table[key]
        if not tail:
            table[key] = _parse_item(item.text)
            return table
        if not isinstance(child, InlineTable):
            raise _not_a_table(item, len(item.path) - len(tail) - 1)
        updated = _set_inline(child, tail, item)
        if updated is not child:
            table[key] = updated
        return table
    # tomlkit appends to inline tables as `{ a = 1, b = 2}`; writing the text keeps the style.
    entry = f"{_key_text(key)} = {_nested_inline(tail, item.text)}"
    return _parse_item(_append_entry(table.as_string(), entry))


def _append_entry(text: str, entry: str) -> str:
    inner = text.strip()[1:-1]
    if not inner.strip():
        return "{ " + entry + " }"
    closing = " }" if inner.endswith(" ") else "}"
    return "{" + inner.rstrip() + ", " + entry + closing


def _nested_inline(rest: tuple[str, ...], value_text: str) -> str:
    text = value_text
    for key in reversed(rest):
        text = "{ " + f"{_key_text(key)} = {text}" + " }"
    return text


def _put(container: Container | Table | tomlkit.TOMLDocument, key: str, value: Item) -> None:
    """Replacing keeps the old value's comment (`max_num_seqs = 16   # 8 → 32: ...`); a new key goes
    after the table's last key, before the blank line that ends it."""
    container[key] = value


def _parse_item(text: str) -> Item:
    value = tomlkit.parse(f"v = {text}\n").item("v")
    assert isinstance(value, Item)
    return value


def _key_text(key: str) -> str:
    return str(tomlkit.key(key).as_string())


def _not_a_table(item: Assignment, depth: int) -> BadInput:
    prefix = ".".join(item.path[: depth + 1])
    return BadInput(
        f"{_shown(item.given)}: {prefix} is a value in this profile, not a table, "
        f"so {item.dotted} cannot be set",
        hint=f"set {prefix} as a whole, for example {prefix}={{ {item.path[-1]} = {item.text} }}",
    )
