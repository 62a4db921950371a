"""smoke: quick answers a working model must give — arithmetic, Chinese, a little code, a needle
found in long contexts, the same answer three times at temperature 0, and 2-/4-way concurrency.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from basis.setting import Setting
from gates.base import GateBase, Need
from gates.context import GateContext
from gates.needle import ESTIMATED, TokenizeFailed, fit
from gates.outcome import Outcome

CJK = re.compile(r"[\u4e00-\u9fff]")
CHECKS = ("arithmetic", "chinese", "code", "needle", "consistency", "concurrency")
ANSWER_ROOM = 256  # tokens kept free for the needle's answer when a needle would fill the context


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content: str
    finish_reason: str | None
    reasoning: str

    def problem(self) -> str | None:
        if self.status != 200:
            return f"HTTP {self.status or 'no connection'}: {self.content}".rstrip(": ")
        if not self.content.strip():
            if self.finish_reason == "length" and self.reasoning:
                return "reasoning used the whole budget: empty answer"
            return "empty answer"
        return None


class SmokeGate(GateBase):
    name = "smoke"
    NEEDS: ClassVar[frozenset[Need]] = frozenset({Need.HTTP})
    DEFAULT_TIMEOUT_S = 600.0
    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "checks",
            list,
            list(CHECKS),
            "Which checks to run: " + ", ".join(CHECKS) + ".",
            items=str,
            choices=CHECKS,
        ),
        Setting(
            "needle_contexts",
            list,
            [8192],
            "Needle prompt sizes in tokens, counted by the server's /tokenize (capped to fit "
            "max_model_len), e.g. [8192, 32768].",
            items=int,
            minimum=64,
            maximum=10_000_000,
        ),
        Setting(
            "max_tokens",
            int,
            1024,
            "Token budget per request (room for reasoning models).",
            minimum=1,
            maximum=1_000_000,
        ),
        Setting(
            "request_timeout_s",
            (int, float),
            300.0,
            "Timeout of each request.",
            unit="s",
            minimum=0.1,
            maximum=3600,
        ),
    )

    def check(self, ctx: GateContext) -> Outcome:
        models = ctx.http.get("/v1/models", 10.0)
        if models.status != 200:
            return Outcome.not_yet(f"/v1/models answered {models.status or models.error}")
        self.model = models.json()["data"][0]["id"]
        self.notes: list[str] = []
        self.sizes: list[int] = []  # needle prompt tokens, as the server counted them
        results: dict[str, str | None] = {}
        for check in self.setting("checks"):
            results[check] = getattr(self, f"_{check}")(ctx)
        failing = {k: v for k, v in results.items() if v}
        evidence: dict[str, Any] = {"results": {k: v or "ok" for k, v in results.items()}}
        evidence.update(needle_tokens=self.sizes, notes=self.notes)
        if not results:
            return Outcome.failed("no smoke check selected: the gate would check nothing")
        notes = "".join(f"; {n}" for n in self.notes)
        if failing:
            return Outcome.failed("; ".join(f"{k}: {v}" for k, v in failing.items()) + notes, **evidence)
        return Outcome.passed(f"all {len(results)} checks passed ({', '.join(results)}){notes}", **evidence)

    def _ask(
        self, ctx: GateContext, text: str, temperature: float = 0.0, max_tokens: int | None = None
    ) -> Answer:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens or int(self.setting("max_tokens")),
            "temperature": temperature,
        }
        reply = ctx.http.post_json("/v1/chat/completions", body, float(self.setting("request_timeout_s")))
        if reply.status != 200:
            return Answer(reply.status, reply.body[:300], None, "")
        choice = reply.json()["choices"][0]
        message = choice.get("message") or {}
        return Answer(
            200, message.get("content") or "", choice.get("finish_reason"), message.get("reasoning") or ""
        )

    def _expect(self, answer: Answer, ok: bool, wanted: str) -> str | None:
        return answer.problem() or (None if ok else f"{wanted}; got {answer.content[:120]!r}")

    def _arithmetic(self, ctx: GateContext) -> str | None:
        answer = self._ask(ctx, "What is 17 + 25? Answer with the number only.")
        return self._expect(answer, "42" in answer.content, "expected 42")

    def _chinese(self, ctx: GateContext) -> str | None:
        answer = self._ask(ctx, "请用中文回答：一年有几个季节？")
        return self._expect(answer, bool(CJK.search(answer.content)), "expected an answer in Chinese")

    def _code(self, ctx: GateContext) -> str | None:
        answer = self._ask(ctx, "Write a Python function add(a, b) that returns the sum. Only the code.")
        return self._expect(
            answer, "def " in answer.content and "return" in answer.content, "expected a def … return"
        )

    def _needle(self, ctx: GateContext) -> str | None:
        limit = ctx.expect.max_model_len
        timeout_s = float(self.setting("request_timeout_s"))
        for size in self.setting("needle_contexts"):
            # a needle as long as the whole context leaves no room to answer: it fills what fits
            target = int(size) if limit is None else min(int(size), limit - ANSWER_ROOM)
            if target < 64:
                return f"max_model_len {limit} leaves no room for a needle: remove the needle check"
            code = f"ZX-{int(size) % 9973:04d}-Q"
            try:
                needle = fit(ctx.http, self.model, target, code, timeout_s)
            except TokenizeFailed as err:
                return str(err)
            if not needle.counted and ESTIMATED not in self.notes:
                self.notes.append(ESTIMATED)
            budget = int(self.setting("max_tokens"))
            if limit is not None:
                budget = min(budget, limit - needle.tokens - (0 if needle.counted else 16))
            answer = self._ask(ctx, needle.text, max_tokens=max(16, budget))
            problem = self._expect(
                answer, code in answer.content, f"expected {code} at {needle.tokens} tokens"
            )
            if problem:
                return problem
            self.sizes.append(needle.tokens)
        return None

    def _consistency(self, ctx: GateContext) -> str | None:
        answers = [self._ask(ctx, "Name three primary colours.") for _ in range(3)]
        problem = next((a.problem() for a in answers if a.problem()), None)
        if problem:
            return problem
        same = len({a.content for a in answers}) == 1
        return None if same else "three answers at temperature 0 differ"

    def _concurrency(self, ctx: GateContext) -> str | None:
        for width in (2, 4):
            with ThreadPoolExecutor(max_workers=width) as pool:
                answers = list(pool.map(lambda i: self._ask(ctx, f"Count from 1 to {i + 3}."), range(width)))
            bad = [a.problem() for a in answers if a.problem()]
            if bad:
                return f"{len(bad)}/{width} concurrent requests failed: {bad[0]}"
        return None
