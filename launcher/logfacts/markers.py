r"""Operator-given marker patterns (`--marker REGEX`), e.g. a kernel patch printing `IQ4XS_BMMVQ_READY`.

A marker is searched in each clean line's message (after vLLM's prefix) and in the whole clean line,
so `^MARKER` matches both a bare `print()` and a logged line. The fast scanner needs a pattern it
can run over raw text: the marker without its zero-width assertions (`^ $ \A \Z \b \B`), which
matches wherever the marker could. Lookarounds cannot be dropped that simply: such a marker makes
the scanner parse every line instead, correct but ~30x slower (docs/logs.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.errors import BadInput
from launcher.logfacts.lines import Record

_LOOKAROUND = re.compile(r"\(\?<?[=!]")


class BadMarker(BadInput):
    """A `--marker` pattern that is not a valid regular expression."""


@dataclass(frozen=True, slots=True)
class MarkerSet:
    patterns: tuple[str, ...]
    compiled: tuple[re.Pattern[str], ...]
    scan: tuple[re.Pattern[str], ...]  # raw-text prefilter versions
    every_line: bool  # some pattern cannot be prefiltered

    @classmethod
    def build(cls, patterns: tuple[str, ...] | list[str]) -> MarkerSet:
        compiled: list[re.Pattern[str]] = []
        scan: list[re.Pattern[str]] = []
        every_line = False
        for pattern in patterns:
            try:
                compiled.append(re.compile(pattern))
            except re.error as err:
                raise BadMarker(f"--marker {pattern!r} is not a valid regular expression: {err}") from None
            relaxed = _relax(pattern)
            if relaxed is None:
                every_line = True
            else:
                scan.append(re.compile(relaxed))
        return cls(tuple(patterns), tuple(compiled), tuple(scan), every_line)

    def matching(self, rec: Record) -> list[int]:
        """Indexes of the patterns this record matches."""
        return [i for i, rx in enumerate(self.compiled) if rx.search(rec.msg) or rx.search(rec.text)]


def _relax(pattern: str) -> str | None:
    """`pattern` minus its zero-width assertions outside character classes; None if it has a
    lookaround or nothing is left."""
    if _LOOKAROUND.search(pattern):
        return None
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            if in_class or pattern[i + 1] not in "AZbB":
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]" or pattern[i - 1] == "["
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if pattern[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
        elif ch not in "^$":
            out.append(ch)
        i += 1
    core = "".join(out)
    try:
        return core if core and re.compile(core).search("") is None else None
    except re.error:
        return None
