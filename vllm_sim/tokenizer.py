"""A deterministic toy tokenizer: one token per word, digit, CJK character or punctuation mark.

Not a real BPE: it only has to be stable (same text → same ids, so prefix caching and usage counts
are reproducible) and roughly proportional to real token counts. Pieces keep their leading
whitespace, so joining the pieces of a text gives the text back.
"""

from __future__ import annotations

import hashlib
import re

VOCAB = 151_000
SPECIAL_BASE = 151_000
_TOKEN = re.compile(
    r"\s*(?:<\|[a-z_]+\|>|[A-Za-z]+|\d|[\u3400-\u9fff\uf900-\ufaff]|[^\sA-Za-z\d])", re.DOTALL
)
_SPECIALS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
)


def pieces(text: str) -> list[str]:
    """Split into token pieces; `"".join(pieces(t)) == t` up to trailing whitespace."""
    out = [m.group(0) for m in _TOKEN.finditer(text)]
    consumed = sum(len(p) for p in out)
    if out and consumed < len(text):
        out[-1] += text[consumed:]
    return out


def token_id(piece: str) -> int:
    stripped = piece.strip()
    if stripped in _SPECIALS:
        return SPECIAL_BASE + _SPECIALS.index(stripped)
    digest = hashlib.blake2b(stripped.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % VOCAB


def encode(text: str) -> list[int]:
    return [token_id(p) for p in pieces(text)]


def count(text: str) -> int:
    return len(pieces(text))
