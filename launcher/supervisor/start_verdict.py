"""A start's verdict in words: the chain's report for a terminal (`render_report`), the reason a
rejected candidate carries (`rejection_reason`: `launch status`, the history, the restart guard),
and `engine_start`, the verdict of an engine that exited before it was ready, so before any gate
could judge it.

The chain charges such a start to whichever gate was waiting (`rejected by kernel_marker: engine
exited with code 1 (tool_parser: KeyError: 'invalid tool call parser: hermess (chose from { …`),
which reads as "the patched kernel is broken". The start has its own verdict instead, led by
vLLM's cause sentence as the log facts read it (`logfacts/failure.py` ranks the lines,
`logfacts/cause.py` takes the sentence out whole), with a did-you-mean where vLLM listed the names
it accepts, and the engine log that holds the whole text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gates.chain import SKIPPED_AFTER_FAILURE, ChainReport
from gates.outcome import GateResult, Verdict
from launcher.logfacts.cause import CauseText, cause_text
from launcher.supervisor.seams import Attempt

VERDICT = "engine_start"
UNJUDGED = "vLLM exited before it was ready"  # why a gate is shown as not run beside that verdict


@dataclass(frozen=True, slots=True)
class EarlyExit:
    exit: str | None  # the engine handle's words, `exited with code 1`; None: not seen to exit yet
    kind: str | None  # the failure kind of the log facts: `tool_parser`, `free_memory`, …
    cause: CauseText | None  # None: vLLM logged no cause the parser knows
    log: Path | None

    def describe(self) -> str:
        """One paragraph, vLLM's sentence first: `invalid tool call parser: hermess — did you mean
        hermes? (tool_parser; vLLM exited with code 1 before it was ready; …)`."""
        lead = self.cause.sentence if self.cause is not None else "vLLM logged no cause the launcher knows"
        if self.cause is not None and self.cause.did_you_mean:
            lead += f" — did you mean {self.cause.did_you_mean}?"
        how = f"vLLM {self.exit} before it was ready" if self.exit else "vLLM's log shows its startup failed"
        where = f"; the whole message is in {self.log}" if self.log is not None else ""
        kind = f"{self.kind}; " if self.kind else ""
        return f"{lead} ({kind}{how}, so no gate could judge it{where})"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": VERDICT,
            "exit": self.exit,
            "failure_kind": self.kind,
            "cause": self.cause.sentence if self.cause is not None else None,
            "did_you_mean": self.cause.did_you_mean if self.cause is not None else None,
            "engine_log": str(self.log) if self.log is not None else None,
        }


def early_exit(attempt: Attempt, log: Path | None) -> EarlyExit | None:
    """The start's own verdict, or None where a gate's verdict stands."""
    return early_exit_of(attempt.engine.exit_description(), attempt.facts(), log)


def early_exit_of(exited: str | None, facts: Mapping[str, Any], log: Path | None) -> EarlyExit | None:
    """An engine that exited before its log showed it ready, or whose log shows its startup failed
    (vLLM exits right after; a gate may have seen the line first)."""
    outcome = facts.get("outcome")
    if outcome == "ready" or (exited is None and outcome != "failed"):
        return None  # it served, or it is still starting: a gate judged it
    kind = facts.get("failure_kind")
    message = facts.get("failure_message") or facts.get("failure_line")
    cause = cause_text(str(message)) if message else None
    return EarlyExit(exit=exited, kind=str(kind) if kind else None, cause=cause, log=log)


def rejection_reason(label: str, failure_gate: str | None, summary: str, early: EarlyExit | None) -> str:
    """What `launch status`, the history and the restart guard say about a rejected candidate."""
    if early is not None:
        return f"{label} rejected at {VERDICT}: {early.describe()}"
    if failure_gate is None:
        return "rejected"
    return f"{label} rejected by {failure_gate}: {summary}"


MARKS = {
    Verdict.PASS: "PASS",
    Verdict.FAIL: "FAIL",
    Verdict.ERROR: "ERROR",
    Verdict.SKIP: "skip",
    Verdict.NOT_YET: "----",
}


def render_report(report: ChainReport, title: str, early: EarlyExit | None = None) -> str:
    """`early`: the engine exited before any gate could judge it, which is the verdict then: the
    gate that was waiting and those skipped after it are shown as not run, never as a second verdict."""
    lines = [title]
    width = max((len(r.name) for r in report.results), default=4)
    for result in report.results:
        lines += _result_lines(result, width, unjudged=early is not None and left_unjudged(result))
    if report.passed:
        verdict = "all required gates passed"
    elif early is not None:
        verdict = f"rejected at {VERDICT}: {early.describe()}"
    else:
        verdict = f"rejected by {report.first_failure.name}"  # type: ignore[union-attr]
    lines.append(f"  → {verdict}")
    return "\n".join(lines)


def left_unjudged(result: GateResult) -> bool:
    """Beside an engine_start verdict: the gate that failed (it was waiting when vLLM exited) and the
    ones the chain skipped after it. A pass, or a skip for the gate's own reason, stands."""
    return result.blocks_promotion or result.summary == SKIPPED_AFTER_FAILURE


def unjudged_in_status(gates: list[dict[str, Any]], rollback_reason: object) -> list[bool]:
    """`launch status`'s gates (status.json) read the same way, where its reason is engine_start and
    a failed gate says the engine exited while it waited (the chain's `failure_kind` evidence)."""
    died = f" rejected at {VERDICT}: " in str(rollback_reason or "") and any(
        g.get("verdict") in ("fail", "error") and "failure_kind" in (g.get("evidence") or {}) for g in gates
    )
    return [
        died and (g.get("verdict") in ("fail", "error") or g.get("summary") == SKIPPED_AFTER_FAILURE)
        for g in gates
    ]


def _result_lines(result: GateResult, width: int, *, unjudged: bool) -> list[str]:
    timing = f"{result.name:<{width}} {result.duration_s:7.2f}s"
    if unjudged:
        return [f"  {MARKS[Verdict.NOT_YET]:<5} {timing}  not run: {UNJUDGED}"]
    optional = "" if result.required else " (optional)"
    lines = [f"  {MARKS[result.verdict]:<5} {timing}  {result.summary}{optional}"]
    if result.verdict in (Verdict.FAIL, Verdict.ERROR):
        for name, case in (result.evidence.get("cases") or {}).items():
            if isinstance(case, dict) and not case.get("ok", True) and case.get("body"):
                lines.append(f"          {name}: {case['body'][:400]}")
    return lines
