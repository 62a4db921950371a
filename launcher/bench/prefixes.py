"""Nested-prefix detection: a "cold" prompt that begins with another prompt is warm.

The field note's trap: six context lengths cut from one document, so the 43K prompt contained the
21K one and its "cold" TTFT (4.63 s) came out below the 21K's (6.24 s). A prefix cache hashes
blocks from the start of the prompt, so what matters is the longest common *prefix*: the share of
the later prompt that an earlier one already put in the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NESTED_SHARE = 0.2


def common_prefix_len(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    lo, hi = 0, limit
    while lo < hi:  # binary search on slice equality: C-speed comparisons on 100K-character prompts
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    earlier: int
    later: int
    chars: int
    share: float  # of the later prompt


def shared_prefixes(texts: Sequence[str], min_share: float = NESTED_SHARE) -> list[SharedPrefix]:
    """Each prompt whose beginning an earlier prompt already covers for at least `min_share` of it."""
    found: list[SharedPrefix] = []
    for j in range(1, len(texts)):
        later = texts[j]
        if not later:
            continue
        best = max(((common_prefix_len(texts[i], later), i) for i in range(j)), default=(0, -1))
        share = best[0] / len(later)
        if share >= min_share:
            found.append(SharedPrefix(best[1], j, best[0], share))
    return found
