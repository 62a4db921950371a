"""The shipped bench corpus (English and Chinese prose) and the documents built from it.

Never random tokens: random-token prompts make models degenerate, and degenerate output decodes
faster (field note: a 52.5 tok/s that was inflated this way). A document of any length is built
from deterministic shuffles of the paragraphs; a paragraph never follows itself, so no block of
text repeats back to back. Lengths are estimated here (CJK characters + 1.3 x Latin words) and
calibrated against the server's own token count by the caller.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
LANGS = ("en", "zh")


def estimate_tokens(text: str) -> float:
    """A tokenizer-free length estimate; only ratios of it are trusted (see Workload calibration)."""
    return len(_CJK.findall(text)) + 1.3 * len(_WORD.findall(text))


@dataclass(frozen=True, slots=True)
class Paragraph:
    lang: str
    text: str
    tokens_est: float


@cache
def paragraphs() -> tuple[Paragraph, ...]:
    out: list[Paragraph] = []
    for lang in LANGS:
        raw = (
            resources.files("launcher.data").joinpath(f"bench_corpus_{lang}.txt").read_text(encoding="utf-8")
        )
        for block in re.split(r"\n\s*\n", raw):
            text = " ".join(block.split()) if lang == "en" else "".join(block.split())
            if text:
                out.append(Paragraph(lang, text, estimate_tokens(text)))
    return tuple(out)


def shuffled(rng: random.Random, previous: Paragraph | None) -> list[Paragraph]:
    """One pass over every paragraph in a seeded order, never starting with `previous`."""
    order = list(paragraphs())
    rng.shuffle(order)
    if previous is not None and order[0] == previous:
        order[0], order[-1] = order[-1], order[0]
    return order


def _cut(text: str, share: float) -> str:
    """About `share` of a paragraph, ending at a sentence boundary when there is one."""
    keep = max(1, int(len(text) * share))
    ends = [m.end() for m in _SENTENCE_END.finditer(text) if 0 < m.end() <= keep]
    return text[: ends[-1]].strip() if ends else text[:keep]


def language_sample(lang: str, tokens_est: float) -> str:
    """Paragraphs of one language only (for calibrating that language's ratio)."""
    picked, total = [], 0.0
    for para in (p for p in paragraphs() if p.lang == lang):
        if total >= tokens_est:
            break
        picked.append(para.text)
        total += para.tokens_est
    return "\n\n".join(picked)


def document(seed: int, tokens: float, ratios: dict[str, float] | None = None) -> str:
    """Paragraphs from seeded shuffles until about `tokens` (estimate x the language's ratio)."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0.0
    previous: Paragraph | None = None
    while total < tokens:
        for para in shuffled(rng, previous):
            size = para.tokens_est * (ratios or {}).get(para.lang, 1.0)
            left = tokens - total
            if left <= 0:
                break
            if size > left:
                parts.append(_cut(para.text, left / size))
                total = tokens
                break
            parts.append(para.text)
            total += size
            previous = para
    return "\n\n".join(parts)
