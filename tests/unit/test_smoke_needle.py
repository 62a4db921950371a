"""Needle sizing: rescaled until the server's count sits just under the target; an estimate only
when the server has no `/tokenize`, and then it says so."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from gates.context import HttpReply
from gates.needle import ESTIMATED, TokenizeFailed, fit, needle_prompt


class TokenizingServer:
    """Answers `/tokenize` like vLLM with `tokens_per_word` tokens a word; records each call."""

    def __init__(self, tokens_per_word: float | None, status: int = 200) -> None:
        self.tokens_per_word = tokens_per_word
        self.status = status
        self.calls: list[Mapping[str, Any]] = []

    def get(self, path: str, timeout_s: float) -> HttpReply:
        raise AssertionError(path)

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        assert path == "/tokenize"
        self.calls.append(body)
        if self.tokens_per_word is None:
            return HttpReply(self.status, '{"detail":"Not Found"}')
        words = len(body["messages"][0]["content"].split())
        count = int(words * self.tokens_per_word) + 9  # + the chat template
        return HttpReply(
            200, json.dumps({"count": count, "max_model_len": 8192, "tokens": [], "token_strs": None})
        )

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        raise AssertionError(path)


@pytest.mark.parametrize("tokens_per_word", [1.0, 1.4, 1.75, 2.6])
def test_the_needle_lands_just_under_the_target_whatever_the_tokenizer(tokens_per_word: float) -> None:
    server = TokenizingServer(tokens_per_word)
    needle = fit(server, "m", 7936, "ZX-0001-Q", 5.0)
    assert needle.counted and 0.97 * 7936 <= needle.tokens <= 7936, needle.tokens
    assert "The secret code is ZX-0001-Q." in needle.text
    assert all(call["model"] == "m" and call["messages"][0]["role"] == "user" for call in server.calls)


@pytest.mark.parametrize("status", [404, 405])
def test_without_tokenize_the_count_is_an_estimate_and_says_so(status: int) -> None:
    needle = fit(TokenizingServer(None, status), "m", 4000, "ZX-0001-Q", 5.0)
    assert not needle.counted and needle.tokens == 4000
    assert ESTIMATED == "token count estimated: the server has no /tokenize"
    # the guess leaves the 25 % the word estimate used to miss by
    assert len(needle.text.split()) < 4000 / 1.4 / 1.2


def test_a_tokenize_error_is_a_failed_check_not_a_guess() -> None:
    with pytest.raises(TokenizeFailed, match="HTTP 500"):
        fit(TokenizingServer(None, 500), "m", 4000, "ZX-0001-Q", 5.0)


def test_the_code_sits_in_the_middle_and_the_question_ends_the_prompt() -> None:
    text = needle_prompt(300, "ZX-0042-Q")
    assert text.endswith("What is the secret code? Answer with the code only.")
    assert 0.2 < text.index("ZX-0042-Q") / len(text) < 0.8
    assert 300 <= len(text.split()) <= 300 + 20
