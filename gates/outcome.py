"""What a gate returns: a verdict with its evidence. Gates return outcomes; exceptions mean bugs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    PASS = "pass"
    NOT_YET = "not_yet"  # no decision yet: keep asking until the deadline turns it into FAIL
    FAIL = "fail"
    SKIP = "skip"  # not applicable (with a reason), e.g. graph_capture for an eager profile
    ERROR = "error"  # the gate itself raised: a bug, reported and treated as a failure

    @property
    def final(self) -> bool:
        return self is not Verdict.NOT_YET


@dataclass(frozen=True, slots=True)
class Outcome:
    """One look at the server: the verdict, one line for humans, and the evidence behind it."""

    verdict: Verdict
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def passed(cls, summary: str, **evidence: Any) -> Outcome:
        return cls(Verdict.PASS, summary, evidence)

    @classmethod
    def failed(cls, summary: str, **evidence: Any) -> Outcome:
        return cls(Verdict.FAIL, summary, evidence)

    @classmethod
    def not_yet(cls, summary: str, **evidence: Any) -> Outcome:
        return cls(Verdict.NOT_YET, summary, evidence)

    @classmethod
    def skipped(cls, summary: str, **evidence: Any) -> Outcome:
        return cls(Verdict.SKIP, summary, evidence)


@dataclass(frozen=True, slots=True)
class GateResult:
    """A gate's final outcome in the chain's report (status, history and `--json` show these)."""

    name: str
    verdict: Verdict
    summary: str
    evidence: dict[str, Any]
    duration_s: float
    required: bool = True

    @property
    def blocks_promotion(self) -> bool:
        return self.required and self.verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.NOT_YET)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": str(self.verdict),
            "summary": self.summary,
            "evidence": self.evidence,
            "duration_s": round(self.duration_s, 3),
            "required": self.required,
        }
