"""The chain runner: asks each gate until it decides or its deadline passes; the one place that
turns a gate's exception into an ERROR result.

A gate that says NOT_YET is asked again when the log changes (or after `poll_s`); at its deadline
the last NOT_YET becomes FAIL with the gate's own words. A required gate that fails stops the
chain: later gates are reported as skipped, so the report always lists every gate.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gates.context import GateContext, interruption
from gates.logged_error import last_exception
from gates.outcome import GateResult, Outcome, Verdict


class Gate(Protocol):
    @property
    def name(self) -> str: ...

    required: bool
    timeout_s: float
    poll_s: float

    def check(self, ctx: GateContext) -> Outcome: ...


ProgressFn = Callable[[int, int, str, Outcome | None], None]
SKIPPED_AFTER_FAILURE = "not run: an earlier required gate failed"


@dataclass(frozen=True, slots=True)
class ChainReport:
    results: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return not any(r.blocks_promotion for r in self.results)

    @property
    def first_failure(self) -> GateResult | None:
        return next((r for r in self.results if r.blocks_promotion), None)

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self.results]


@dataclass
class ChainRunner:
    gates: Sequence[Gate]
    on_progress: ProgressFn = field(default=lambda *_: None)
    should_stop: Callable[[], bool] = field(default=lambda: False)

    def run(self, ctx: GateContext) -> ChainReport:
        ctx = dataclasses.replace(ctx, stop_requested=self.should_stop)
        results: list[GateResult] = []
        for index, gate in enumerate(self.gates):
            if results and results[-1].blocks_promotion:
                results += [self._skipped(g, SKIPPED_AFTER_FAILURE) for g in self.gates[index:]]
                return ChainReport(tuple(results))
            self.on_progress(index, len(self.gates), gate.name, None)
            result = self._run_one(gate, ctx)
            self.on_progress(index, len(self.gates), gate.name, Outcome(result.verdict, result.summary))
            results.append(result)
        return ChainReport(tuple(results))

    def _run_one(self, gate: Gate, ctx: GateContext) -> GateResult:
        started = ctx.clock.monotonic()
        _, log_position = ctx.log.lines_since(0)  # what vLLM prints from now on is this gate's
        deadline = started + gate.timeout_s
        while True:
            outcome = self._ask(gate, ctx)
            now = ctx.clock.monotonic()
            if outcome.verdict is Verdict.PASS and (why := interruption(ctx)) is not None:
                # A pass measured on a dead engine, or cut short by a stop, proves nothing.
                outcome = Outcome.failed(f"{why} before the verdict: {outcome.summary}", **outcome.evidence)
                break
            if outcome.verdict.final:
                break
            died = ctx.server.exit_description()
            if died is not None:
                kind, cause = logged_failure(_settled_facts(ctx))
                outcome = Outcome.failed(
                    f"engine {died}{cause} while waiting: {outcome.summary}",
                    **outcome.evidence,
                    **({"failure_kind": kind} if kind else {}),
                )
                break
            if self.should_stop():
                outcome = Outcome.failed(
                    f"stopped by a signal while waiting: {outcome.summary}", **outcome.evidence
                )
                break
            if now >= deadline:
                outcome = Outcome.failed(
                    f"deadline {gate.timeout_s:g}s passed: {outcome.summary}", **outcome.evidence
                )
                break
            ctx.log.wait_for_change(min(gate.poll_s, max(0.0, deadline - now)))
        if outcome.verdict in (Verdict.FAIL, Verdict.ERROR) and "failure_kind" not in outcome.evidence:
            logged = last_exception(ctx.log.lines_since(log_position)[0])
            if logged is not None:
                evidence = {**outcome.evidence, "vllm_logged": logged}
                outcome = Outcome(outcome.verdict, f"{outcome.summary}; vLLM logged: {logged}", evidence)
        return GateResult(
            name=gate.name,
            verdict=outcome.verdict,
            summary=outcome.summary,
            evidence=outcome.evidence,
            duration_s=ctx.clock.monotonic() - started,
            required=gate.required,
        )

    @staticmethod
    def _ask(gate: Gate, ctx: GateContext) -> Outcome:
        try:
            return gate.check(ctx)
        except Exception as err:  # the one place a gate's bug becomes a result
            return Outcome(
                Verdict.ERROR,
                f"gate raised {type(err).__name__}: {err}",
                {"traceback": traceback.format_exc(limit=8)},
            )

    @staticmethod
    def _skipped(gate: Gate, why: str) -> GateResult:
        return GateResult(gate.name, Verdict.SKIP, why, {}, 0.0, required=gate.required)


# A death is seen by its process (a pidfd, the process connector) before the lines the process
# wrote last have crossed the pipe and the log keeper: wait for them until vLLM's cause is read, or
# the log stays quiet this long, or the bound passes (a SIGKILL logs nothing).
SETTLE_QUIET_S, SETTLE_MAX_S = 1.0, 5.0


def _settled_facts(ctx: GateContext) -> Mapping[str, Any]:
    """The log's facts once the dead engine's last lines are in (see SETTLE_QUIET_S)."""
    _, position = ctx.log.lines_since(0)
    started = quiet_since = ctx.clock.monotonic()
    while not ctx.log.facts().get("failure_kind"):
        now = ctx.clock.monotonic()
        if now - quiet_since >= SETTLE_QUIET_S or now - started >= SETTLE_MAX_S:
            break
        ctx.log.wait_for_change(SETTLE_QUIET_S - (now - quiet_since))
        lines, position = ctx.log.lines_since(position)
        if lines:
            quiet_since = ctx.clock.monotonic()
    return ctx.log.facts()


def logged_failure(facts: Mapping[str, Any]) -> tuple[str | None, str]:
    """The cause vLLM itself logged (the parser's failure fact), as " (kind: message)", so a report
    says "free_memory: Free memory on device ..." and not only "exited with code 1"."""
    kind = facts.get("failure_kind")
    if not kind:
        return None, ""
    message = str(facts.get("failure_message") or facts.get("failure_line") or "")
    return str(kind), f" ({kind}: {shortened(message, 300)})" if message else f" ({kind})"


def shortened(text: str, limit: int) -> str:
    """At most `limit` characters, cut between words and marked `…` (never mid-word: the whole
    text is in the engine log the report names)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;") + "…"
