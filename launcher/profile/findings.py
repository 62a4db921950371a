"""Validation findings: errors stop a start, warnings are shown and let it go on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path


class Level(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    level: Level
    message: str


@dataclass(slots=True)
class Findings:
    """Collects every finding so the operator sees all problems at once, not one per run."""

    items: list[Finding] = field(default_factory=list)

    def error(self, message: str) -> None:
        self.items.append(Finding(Level.ERROR, message))

    def warn(self, message: str) -> None:
        self.items.append(Finding(Level.WARNING, message))

    def error_or_warn(self, as_warning: bool, message: str) -> None:
        (self.warn if as_warning else self.error)(message)

    @property
    def errors(self) -> list[str]:
        return [f.message for f in self.items if f.level is Level.ERROR]

    @property
    def warnings(self) -> list[str]:
        return [f.message for f in self.items if f.level is Level.WARNING]


def where(source: Path | None, dotted_key: str) -> str:
    """`profiles/prod.toml: args.max_num_seqs` — the file a value came from, and its key."""
    return f"{source}: {dotted_key}" if source is not None else dotted_key


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""
