"""Speculative decoding whose acceptance depends on the text, like a real drafter's.

Draft position i accepts the true next token when u < base x 0.85^i x f(token), where u is a
hash of (previous token, token, i) in [0, 1). For `ngram` drafting f is 1 when the token occurs in
the prompt and 0.25 otherwise; for model drafters (mtp, eagle, draft_model...) f is 1 for short
tokens and punctuation, 0.85 for words and 0.7 for CJK characters. So identical prompts at
temperature 0 give one identical rate, and a mixed workload a lower, varied one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

DECAY = 0.85


def _unit(*parts: str) -> float:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(slots=True)
class SpecStats:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)


class SpecDecode:
    def __init__(self, method: str, num_tokens: int, base: float) -> None:
        self.method = method
        self.k = num_tokens
        self.base = base
        self.stats = SpecStats(per_position=[0] * num_tokens)

    def _factor(self, token: str, prompt_words: frozenset[str]) -> float:
        text = token.strip()
        if self.method.startswith("ngram"):
            return 1.0 if text in prompt_words else 0.25
        if len(text) <= 1 and not ("\u3400" <= text[:1] <= "\u9fff"):
            return 1.0
        if text and "\u3400" <= text[0] <= "\u9fff":
            return 0.7
        return 0.85

    def draft(self, previous: str, upcoming: list[str], prompt_words: frozenset[str]) -> int:
        """Accepted draft tokens for one decode step (0..k), given the tokens that really come next."""
        accepted = 0
        prev = previous
        for i, token in enumerate(upcoming[: self.k]):
            p = self.base * DECAY**i * self._factor(token, prompt_words)
            if _unit(prev, token, str(i)) >= p:
                break
            accepted += 1
            prev = token
        self.stats.drafts += 1
        self.stats.draft_tokens += self.k
        self.stats.accepted += accepted
        for i in range(accepted):
            self.stats.per_position[i] += 1
        return accepted
