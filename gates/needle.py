"""The smoke gate's needle prompt, sized in the server's own tokens.

A word-count estimate ran about 25 % low against real tokenizers, so a needle sized just under
`max_model_len` got HTTP 400. The server counts instead: vLLM serves `POST /tokenize` (from 0.6.0
on; 0.26.0 answers `{"count", "max_model_len", "tokens", ...}`), given the same chat `messages` the
request will carry, so the count includes the chat template. The haystack is rescaled until the
count sits just under the target. Only a server without `/tokenize` (404/405) falls back to the
estimate, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from gates.context import HttpClient
from gates.traffic import PARAGRAPHS

QUESTION = "What is the secret code? Answer with the code only."
WORDS_PER_TOKEN = 1 / 1.4  # the first guess only; the server's count corrects it
ESTIMATE_FACTOR = 1.25  # without /tokenize: real tokens ≈ 1.25 × the word-based guess
FIT_ROUNDS = 4
CLOSE_ENOUGH = 0.97  # stop rescaling once the count is within 3 % under the target
ESTIMATED = "token count estimated: the server has no /tokenize"


@dataclass(frozen=True, slots=True)
class Needle:
    text: str
    tokens: int  # prompt tokens, counted by the server, or the estimate when `counted` is False
    counted: bool


def needle_prompt(words: int, code: str) -> str:
    """About `words` words of real prose with one sentence holding the code in the middle."""
    filler: list[str] = []
    total = 0
    index = 0
    while total < words:
        paragraph = PARAGRAPHS[index % len(PARAGRAPHS)].split()[: max(1, words - total)]
        filler.append(" ".join(paragraph))
        total += len(paragraph)
        index += 1
    filler.insert(len(filler) // 2, f"The secret code is {code}.")
    return "\n\n".join(filler) + "\n\n" + QUESTION


def count_tokens(http: HttpClient, model: str, text: str, timeout_s: float) -> int | None:
    """The server's count of a one-message chat prompt; None when it has no `/tokenize`."""
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    reply = http.post_json("/tokenize", body, timeout_s)
    if reply.status in (404, 405):
        return None
    if reply.status != 200:
        raise TokenizeFailed(f"/tokenize answered HTTP {reply.status or 'no connection'}: {reply.body[:200]}")
    count = reply.json().get("count") if reply.body.startswith("{") else None
    if not isinstance(count, int):
        raise TokenizeFailed(f"/tokenize answered without a count: {reply.body[:200]}")
    return count


class TokenizeFailed(Exception):
    """/tokenize exists but did not count: the check fails with this message (not a bug)."""


def fit(http: HttpClient, model: str, target: int, code: str, timeout_s: float) -> Needle:
    """A needle prompt of at most `target` tokens as the server counts them, as close as it gets."""
    words = max(8, int(target * WORDS_PER_TOKEN))
    best: Needle | None = None
    for _ in range(FIT_ROUNDS):
        text = needle_prompt(words, code)
        tokens = count_tokens(http, model, text, timeout_s)
        if tokens is None:
            guess = max(8, int(target * WORDS_PER_TOKEN / ESTIMATE_FACTOR))
            return Needle(needle_prompt(guess, code), target, counted=False)
        if tokens <= target and (best is None or tokens > best.tokens):
            best = Needle(text, tokens, counted=True)
        if target * CLOSE_ENOUGH <= tokens <= target:
            break
        words = max(8, int(words * target * (1 + CLOSE_ENOUGH) / 2 / tokens))
    if best is None:
        raise TokenizeFailed(f"no needle prompt fits {target} tokens (the last had {tokens})")
    return best
