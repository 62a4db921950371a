"""vLLM's own cause sentence out of a failure message, whole: what the operator should read first.

The failure fact (`failure.py`) keeps the message of the line that proved the failure, with its
exception class and, for an unknown parser name, the whole registry: 0.33's `KeyError: 'invalid
tool call parser: hermess (chose from { apertus,…,xlam })'` lists 58 names, 0.26's `KeyError:
"Reasoning parser 'x' not found. Available parsers: a, b"` 28 (vllm-facts.md §5.5). The sentence
is kept whole, never cut; the registry becomes the names a did-you-mean picks from. The complete
line stays in the engine log.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from launcher.logfacts.lines import EXCEPTION_LINE

# `invalid tool call parser: X (chose from { a,b })` (0.6.3+), `invalid reasoning parser: X (…)`
_CHOSE_FROM = re.compile(
    r"^(?P<sentence>invalid (?:tool call|reasoning) parser: (?P<name>\S*))"
    r" \(chose from \{ ?(?P<names>[^}]*?) ?\}\)$"
)
# `Reasoning parser 'x' not found. Available parsers: a, b` (abs_reasoning_parsers.py, 0.13+)
_AVAILABLE = re.compile(
    r"^(?P<sentence>Reasoning parser '(?P<name>[^']*)' not found\.) Available parsers: (?P<names>.*)$"
)


@dataclass(frozen=True, slots=True)
class CauseText:
    """`sentence`: vLLM's words without the exception class or the list of choices; `refused` and
    `choices`: the name vLLM refused and the names it offered, when it listed them."""

    sentence: str
    refused: str | None = None
    choices: tuple[str, ...] = ()

    @property
    def did_you_mean(self) -> str | None:
        if self.refused is None:
            return None
        close = difflib.get_close_matches(self.refused, self.choices, n=1, cutoff=0.6)
        return close[0] if close else None


def cause_text(message: str) -> CauseText:
    """The cause sentence of a failure message (`failure_message`, the line without its log prefix)."""
    text = _without_exception_class(message.strip())
    for pattern in (_CHOSE_FROM, _AVAILABLE):
        match = pattern.match(text)
        if match is not None:
            names = tuple(n.strip() for n in match.group("names").split(",") if n.strip())
            return CauseText(match.group("sentence"), match.group("name"), names)
    return CauseText(text)


def _without_exception_class(text: str) -> str:
    """`KeyError: 'x'` → `x`: the class names Python's kind of error, not vLLM's cause; a KeyError
    shows its message as a repr, in quotes."""
    match = EXCEPTION_LINE.match(text)
    if match is None or not match.group(0).endswith(":"):
        return text
    rest = text[match.end() :].strip()
    if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "'\"":
        rest = rest[1:-1]
    return rest or text
