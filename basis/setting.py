"""A setting declared once, with type, default, unit, description and the values it allows; docs
are generated from it and the dry run checks every value against it (a type alone let `poll_s = 0`
spin at 98% CPU and `baseline_window = 0` pass a 1200 MiB/min leak). Settings are read only through
`SettingValues`, which owns the defaults: a reader that spells its own default drifts (the stop
grace of `launch try` once differed from the declared one)."""

from __future__ import annotations

import builtins
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    type: type | tuple[type, ...]
    default: Any
    description: str
    unit: str | None = None
    minimum: float | None = None  # numbers, and the numbers of a list
    maximum: float | None = None
    choices: tuple[str, ...] | None = None  # a string's allowed values, or a list's allowed items
    items: builtins.type | None = None  # a list's item type
    regex: bool = False  # a list of regexes: each must compile and match something

    def accepts(self, value: Any) -> bool:
        """Type check as TOML gives values: bools are not ints, ints are valid floats."""
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        if isinstance(value, bool):
            return bool in types
        if isinstance(value, int) and float in types:
            return True
        return isinstance(value, types)

    def problem(self, value: Any) -> str | None:
        """Why a value of the right type is still refused (range, allowed set, items), or None."""
        if isinstance(value, list):
            return self._list_problem(value)
        return self._scalar_problem(value)

    def _scalar_problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int | float):
            return self._number_problem(value)
        if isinstance(value, str):
            return self._text_problem(value)
        return None

    def _number_problem(self, value: float) -> str | None:
        if not math.isfinite(value):
            return "must be a finite number"
        if self.minimum is not None and value < self.minimum:
            return f"must be ≥ {_num(self.minimum)}"
        if self.maximum is not None and value > self.maximum:
            return f"must be ≤ {_num(self.maximum)}"
        return None

    def _text_problem(self, value: str) -> str | None:
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            return "contains a control character"
        if self.choices is not None and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}"
        return None

    def _list_problem(self, value: list[Any]) -> str | None:
        for index, item in enumerate(value):
            if self.items is not None and not _is(item, self.items):
                return f"item {index} ({item!r}) must be a {self.items.__name__}"
            if isinstance(item, str) and not item:
                return f"item {index} is empty"
            if self.choices is not None and item not in self.choices:
                return f"item {index} ({item!r}) must be one of {', '.join(self.choices)}"
            if self.regex and isinstance(item, str) and (why := _regex_problem(item)):
                return f"item {index} ({item!r}) {why}"
            problem = self._scalar_problem(item)
            if problem is not None:
                return f"item {index} ({item!r}) {problem}"
        return None

    @property
    def type_name(self) -> str:
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        name = " or ".join(t.__name__ for t in types)
        return f"{name} of {self.items.__name__}" if self.items is not None else name

    @property
    def allowed(self) -> str:
        """The allowed values in words, for the docs: `≥ 0.05`, `1–64`, `one of a, b`."""
        parts = []
        if self.minimum is not None and self.maximum is not None:
            parts.append(f"{_num(self.minimum)}–{_num(self.maximum)}")
        elif self.minimum is not None:
            parts.append(f"≥ {_num(self.minimum)}")
        elif self.maximum is not None:
            parts.append(f"≤ {_num(self.maximum)}")
        if self.choices is not None:
            parts.append(("each one of " if self.items else "one of ") + ", ".join(self.choices))
        if self.regex:
            parts.append("regexes that match something")
        elif self.items is str and self.choices is None:
            parts.append("non-empty strings")
        return "; ".join(parts) or "any"


@dataclass(frozen=True, slots=True)
class SettingValues:
    """A table (a profile's `[supervisor]`, `[engine]`, `[gates.NAME]`…) read through its
    declarations: a key the table does not set has the declared default, and a name that is not
    declared is a KeyError (a typo in the code, never a silent default)."""

    settings: tuple[Setting, ...]
    table: Mapping[str, Any]

    @classmethod
    def of(cls, settings: Iterable[Setting], table: Mapping[str, Any] | None) -> SettingValues:
        return cls(tuple(settings), table if isinstance(table, Mapping) else {})

    def declared(self, name: str) -> Setting:
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(f"no setting {name!r} is declared here")

    def value(self, name: str) -> Any:
        """The table's value, else the declared default (None where the declaration has none)."""
        return self.table.get(name, self.declared(name).default)

    def number(self, name: str) -> float:
        return float(self.value(name))

    def integer(self, name: str) -> int:
        return int(self.value(name))

    def flag(self, name: str) -> bool:
        return bool(self.value(name))

    def text(self, name: str) -> str:
        return str(self.value(name))

    def optional_text(self, name: str) -> str | None:
        value = self.value(name)
        return None if value is None else str(value)


def _num(value: float) -> str:
    return f"{int(value):,}".replace(",", "_") if float(value).is_integer() else f"{value:g}"


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, kind)


def _regex_problem(pattern: str) -> str | None:
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        return f"is not a valid regex: {err}"
    if compiled.search(""):
        return "matches the empty string, so it would pass without a marker"
    return None
