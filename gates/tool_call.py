"""tool_call: the server really does OpenAI tool calls — `auto`, `required`, named, none needed,
and `auto` streamed. Prints ALL_PASS or each failing case with its body.

The cases are independent, so they are sent at once: the gate costs one round trip, not five
(vLLM batches them like any other concurrent requests). Results keep the order of `CASES`.

The model id comes from `/v1/models`, never from configuration: a gate hard-coded to `fable-9b`
got 404 from a server serving `fable-27b`. Reasoning models get room (max_tokens ≥ 1024), and a
reply whose reasoning used the whole budget is reported as that, not as a wrong answer.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from basis.setting import Setting
from gates.base import GateBase, Need
from gates.context import GateContext
from gates.outcome import Outcome
from gates.tool_cases import CASES, CaseResult, ToolCase, judge_reply, judge_stream

MIN_REASONING_BUDGET = 1024


class ToolCallGate(GateBase):
    name = "tool_call"
    NEEDS: ClassVar[frozenset[Need]] = frozenset({Need.HTTP})
    DEFAULT_TIMEOUT_S = 300.0
    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "cases",
            list,
            [c.name for c in CASES],
            "Which cases to run: auto, required, named, no_tool, auto_stream.",
            items=str,
            choices=tuple(c.name for c in CASES),
        ),
        Setting(
            "max_tokens",
            int,
            MIN_REASONING_BUDGET,
            "Token budget per request (≥ 1024 leaves reasoning models room).",
            minimum=1,
            maximum=1_000_000,
        ),
        Setting(
            "request_timeout_s",
            (int, float),
            120.0,
            "Timeout of each request.",
            unit="s",
            minimum=0.1,
            maximum=3600,
        ),
    )

    def check(self, ctx: GateContext) -> Outcome:
        timeout = float(self.setting("request_timeout_s"))
        models = ctx.http.get("/v1/models", timeout)
        if models.status != 200:
            return Outcome.not_yet(f"/v1/models answered {models.status or models.error}")
        try:
            model = models.json()["data"][0]["id"]
        except (ValueError, KeyError, IndexError, TypeError):
            return Outcome.failed("/v1/models lists no model", body=models.body[:500])
        wanted = set(self.setting("cases"))
        results = self._run_cases(ctx, [case for case in CASES if case.name in wanted], model, timeout)
        if not results:
            return Outcome.failed("no tool-call case selected: the gate would check nothing")
        failing = [r for r in results if not r.ok]
        evidence: dict[str, Any] = {"model": model, "cases": {r.name: r.to_json() for r in results}}
        if not failing:
            ways = ", ".join(r.name for r in results)
            return Outcome.passed(f"ALL_PASS ({ways}) on model {model}", **evidence)
        return Outcome.failed("; ".join(f"{r.name}: {r.why}" for r in failing), **evidence)

    def _run_cases(
        self, ctx: GateContext, cases: list[ToolCase], model: str, timeout: float
    ) -> list[CaseResult]:
        if not cases:
            return []
        with ThreadPoolExecutor(max_workers=len(cases), thread_name_prefix="tool-call-case") as pool:
            return list(pool.map(lambda case: self._run_case(ctx, case, model, timeout), cases))

    def _run_case(self, ctx: GateContext, case: ToolCase, model: str, timeout: float) -> CaseResult:
        body = case.request(model, int(self.setting("max_tokens")))
        if case.stream:
            payloads = list(ctx.http.post_sse("/v1/chat/completions", body, timeout))
            return judge_stream(case, payloads)
        reply = ctx.http.post_json("/v1/chat/completions", body, timeout)
        return judge_reply(case, reply.status, reply.body)
