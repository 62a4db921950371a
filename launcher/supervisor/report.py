"""The gate chain's report for a terminal."""

from __future__ import annotations

from gates.chain import ChainReport
from gates.outcome import Verdict
from launcher.supervisor.early_exit import VERDICT, EarlyExit

MARKS = {
    Verdict.PASS: "PASS",
    Verdict.FAIL: "FAIL",
    Verdict.ERROR: "ERROR",
    Verdict.SKIP: "skip",
    Verdict.NOT_YET: "----",
}


def render_report(report: ChainReport, title: str, early: EarlyExit | None = None) -> str:
    """`early`: the engine exited before any gate could judge it, which is the verdict then."""
    lines = [title]
    width = max((len(r.name) for r in report.results), default=4)
    for result in report.results:
        optional = "" if result.required else " (optional)"
        lines.append(
            f"  {MARKS[result.verdict]:<5} {result.name:<{width}} {result.duration_s:7.2f}s  "
            f"{result.summary}{optional}"
        )
        if result.verdict in (Verdict.FAIL, Verdict.ERROR):
            for name, case in (result.evidence.get("cases") or {}).items():
                if isinstance(case, dict) and not case.get("ok", True) and case.get("body"):
                    lines.append(f"          {name}: {case['body'][:400]}")
    if report.passed:
        verdict = "all required gates passed"
    elif early is not None:
        verdict = f"rejected at {VERDICT}: {early.describe()}"
    else:
        verdict = f"rejected by {report.first_failure.name}"  # type: ignore[union-attr]
    lines.append(f"  → {verdict}")
    return "\n".join(lines)
