"""A degeneration score for generated text: the distinct n-gram ratio.

    score = |distinct n-grams| / |n-grams|      (n = 3; words for Latin script, characters for CJK)

1.0 means no trigram repeats; a phrase looping for the whole answer scores near 0. Real prose scores
above 0.9. Text too short to hold MIN_NGRAMS trigrams has no score (None): a short answer is not
evidence of anything. Answers and reasoning are scored apart: reasoning text is naturally more
repetitive, and an answer's quality must not be judged on its thinking (field note: a 0.61 that was
the thinking budget, not the answer).
"""

from __future__ import annotations

import re

N = 3
MIN_NGRAMS = 12
DEGENERATE_BELOW = 0.5

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# A word stops at a CJK character: Chinese glues Latin terms on without spaces (`先用GPU算`), and a word
# that ran on through the characters made a looping answer a handful of units, too short to score.
_UNITS = re.compile(rf"[{_CJK}]|[^\W\d_{_CJK}]+|\d+", re.UNICODE)


def units(text: str) -> list[str]:
    """Words (lower-cased) and single CJK characters; punctuation is ignored."""
    return [u.lower() for u in _UNITS.findall(text)]


def distinct_ngram_ratio(text: str, n: int = N) -> float | None:
    items = units(text)
    grams = [tuple(items[i : i + n]) for i in range(len(items) - n + 1)]
    if len(grams) < MIN_NGRAMS:
        return None
    return len(set(grams)) / len(grams)


def is_degenerate(score: float | None) -> bool:
    return score is not None and score < DEGENERATE_BELOW
