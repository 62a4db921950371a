"""A setting declared once, with type, default, unit and description; docs are generated from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    type: type | tuple[type, ...]
    default: Any
    description: str
    unit: str | None = None

    def accepts(self, value: Any) -> bool:
        """Type check as TOML gives values: bools are not ints, ints are valid floats."""
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        if isinstance(value, bool):
            return bool in types
        if isinstance(value, int) and float in types:
            return True
        return isinstance(value, types)

    @property
    def type_name(self) -> str:
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        return " or ".join(t.__name__ for t in types)
