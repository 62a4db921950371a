"""The watch's rules, as a pure state machine: observations in, one judgement out.

- **Stalled**: with requests running, nothing vLLM publishes has moved for `stall_s` (tokens,
  KV-cache usage as a chunked prefill fills it, requests admitted or finished): `wedged` at once,
  with the figures. A process of the engine stopped (state T) for as long is `wedged` too: it
  cannot step, whatever else answers.
- A liveness probe (the canary, the tool-call canary, `/health`) that misses its deadline is a
  *miss*, unless vLLM's figures moved during its wait: then the server is busy (the canary waits in
  vLLM's queue like any request), not hung. `wedge_after` misses in a row make `wedged`.
- Two error answers in a row make `failing`, counted per series: plain canaries on theirs,
  tool-call canaries on theirs (a plain canary that passes says nothing about tool calls), and real
  traffic mostly 5xx in two windows in a row. A tool-call canary the server is not configured for
  (vLLM's 400 asking for `--enable-auto-tool-choice`) is the profile's matter, not a health signal.
- Host RAM or swap past the preflight limits in two samples in a row, or the leak rule firing,
  make `starving`.
- Any other failed check (a process stopped for less than `stall_s`, a long `D`, one error, one
  low-RAM sample) is `degraded`: the runner retries at once. A check that passes clears what it raised.

The worst standing verdict wins: wedged > failing > starving > degraded > serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    SERVING = "serving"
    DEGRADED = "degraded"
    WEDGED = "wedged"
    FAILING = "failing"
    STARVING = "starving"

    @property
    def is_final(self) -> bool:
        """A verdict the supervisor acts on (on_wedge); serving and degraded are not."""
        return self in (Verdict.WEDGED, Verdict.FAILING, Verdict.STARVING)

    @property
    def serves(self) -> bool:
        """Whether requests are answered: `launch status` exits 3 and systemd's watchdog stops otherwise."""
        return self in (Verdict.SERVING, Verdict.DEGRADED, Verdict.STARVING)


SEVERITY = (Verdict.SERVING, Verdict.DEGRADED, Verdict.STARVING, Verdict.FAILING, Verdict.WEDGED)


class Check(StrEnum):
    CANARY = "canary"
    TOOL_CALL = "tool_call"
    HEALTH = "health"
    METRICS = "metrics"  # decode progress
    TRAFFIC = "traffic"  # the 5xx share of real requests
    PROCESS = "process"
    HOST_MEMORY = "host_memory"
    LEAK = "memory_leak"


LIVENESS = frozenset({Check.CANARY, Check.TOOL_CALL, Check.HEALTH})
# Misses and errors are counted per family: a /health 200 says nothing about generation (it answers
# 200 while the engine core is stopped, and while every request fails), so it never clears a canary's.
FAMILY = {Check.CANARY: Check.CANARY, Check.TOOL_CALL: Check.CANARY, Check.HEALTH: Check.HEALTH}


class Kind(StrEnum):
    """What one observation found."""

    OK = "ok"
    TIMEOUT = "timeout"  # a liveness probe got no answer within its deadline
    ERROR = "error"  # an answer that is an error (status, body, judge)
    STALLED = "stalled"  # requests running, nothing vLLM publishes moving for stall_s
    PROGRESS = "progress"  # vLLM's figures moved, or nothing is running: metrics read fine
    UNREADABLE = "unreadable"  # /metrics could not be read
    BAD_PROCESS = "bad_process"  # stopped, long in D, zombie
    HALTED = "halted"  # a process of the engine stopped (state T) for stall_s: it cannot step
    MOSTLY_5XX = "mostly_5xx"
    LOW_MEMORY = "low_memory"  # host RAM or swap past the limits
    LEAK = "leak"
    UNCONFIGURED = "unconfigured"  # tool calls asked of a server started without them: the profile's


@dataclass(frozen=True, slots=True)
class Observation:
    check: Check
    kind: Kind
    at: float  # monotonic seconds when it was made (a timeout: when its deadline passed)
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)
    waited_s: float = 0.0  # a liveness probe: how long it waited (its deadline for a timeout)

    @property
    def ok(self) -> bool:
        """Says nothing bad about the server's health (an unconfigured tool call is the profile's)."""
        return self.kind in (Kind.OK, Kind.PROGRESS, Kind.UNCONFIGURED)


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    check: Check | None = None  # the check behind the verdict (None: serving)
    detail: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    process: str | None = None  # `VLLM::EngineCore pid 4360 is stopped (state T)` when one was seen

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": str(self.verdict),
            "check": str(self.check) if self.check else None,
            "detail": self.detail,
            "process": self.process,
            "figures": self.figures,
        }

    def same_as(self, other: Judgement | None) -> bool:
        return other is not None and (self.verdict, self.check) == (other.verdict, other.check)


@dataclass(frozen=True, slots=True)
class Rules:
    wedge_after: int = 2
    errors_after: int = 2
    windows_after: int = 2  # 5xx windows, low-memory samples


class Judge:
    """Keeps what the observations so far say; `judgement()` is the verdict now."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self._misses: dict[Check, list[Observation]] = {}  # liveness misses in a row, by family
        self._errors: dict[Check, list[Observation]] = {}  # error answers in a row, per canary series
        self._streaks: dict[Check, list[Observation]] = {}  # traffic and host memory, in a row
        self._standing: dict[Check, Observation] = {}  # the last failed observation of each check
        self._stall: Observation | None = None
        self._halted: Observation | None = None
        self._progress_at: float | None = None  # the last reading at which vLLM's figures had moved
        self._working = False  # the last reading: requests running or waiting
        self._patience_s = 0.0  # how long the stall rule lets those figures stand still
        self._latched: Judgement | None = None  # the leak rule: once it fired, it stays

    # ---- input ------------------------------------------------------------------------------
    def observe(self, obs: Observation) -> None:
        if obs.check in LIVENESS:
            self._liveness(obs)
        elif obs.check is Check.METRICS:
            self._metrics(obs)
        elif obs.check is Check.PROCESS:
            self._halted = obs if obs.kind is Kind.HALTED else None
        elif obs.check is Check.LEAK:
            if obs.kind is Kind.LEAK and self._latched is None:
                self._latched = Judgement(Verdict.STARVING, obs.check, obs.detail, obs.figures)
        else:
            self._streak(obs)
        if obs.ok:
            self._standing.pop(obs.check, None)
        elif not (obs.kind is Kind.TIMEOUT and self.busy(obs)):  # queued behind a full batch: serving
            self._standing[obs.check] = obs

    def busy(self, obs: Observation) -> bool:
        """A probe that timed out while the engine works — requests running or waiting at the last
        reading, its figures seen moving no longer before the probe was sent than the stall rule
        lets them stand — waited in vLLM's queue; it did not hang. Should the engine freeze, the
        stall rule says so. An idle engine excuses nothing, so the tokens of the watch's own last
        canary (gone by the next reading) never excuse the next one."""
        started = obs.at - obs.waited_s
        if self._stall is not None or not self._working or self._progress_at is None:
            return False
        return self._progress_at >= started - self._patience_s

    def _liveness(self, obs: Observation) -> None:
        misses = self._misses.setdefault(FAMILY[obs.check], [])
        if obs.kind is Kind.TIMEOUT:
            if not self.busy(obs):
                misses.append(obs)
            return
        misses.clear()  # an answer, even an error, is not a hang
        if obs.check is Check.HEALTH or obs.kind is Kind.UNCONFIGURED:
            return  # /health 503 comes with an engine death, which the group watch names
        errors = self._errors.setdefault(obs.check, [])
        if obs.kind is Kind.ERROR:
            errors.append(obs)
        else:
            errors.clear()

    def _metrics(self, obs: Observation) -> None:
        if obs.kind is Kind.PROGRESS:
            self._stall = None
            self._working = bool(obs.figures.get("running")) or bool(obs.figures.get("waiting"))
            self._patience_s = float(obs.figures.get("allowed_s") or 0.0)
            if obs.figures.get("moved_since") is not None:
                self._progress_at = obs.at
        elif obs.kind is Kind.STALLED:
            self._stall = obs

    def _streak(self, obs: Observation) -> None:
        streak = self._streaks.setdefault(obs.check, [])
        if obs.ok:
            streak.clear()
        else:
            streak.append(obs)

    # ---- output -----------------------------------------------------------------------------
    def judgement(self) -> Judgement:
        found = [self._wedged(), self._failing(), self._starving(), self._degraded()]
        worst = max(
            (j for j in found if j is not None), key=lambda j: SEVERITY.index(j.verdict), default=None
        )
        if worst is None:
            return Judgement(Verdict.SERVING)
        return replace(worst, process=self._process_detail())

    def _wedged(self) -> Judgement | None:
        for evidence in (self._stall, self._halted):
            if evidence is not None:
                return Judgement(Verdict.WEDGED, evidence.check, evidence.detail, evidence.figures)
        misses = max(self._misses.values(), key=len, default=[])
        if len(misses) < self.rules.wedge_after:
            return None
        last = misses[-1]
        figures = {"misses": len(misses), **last.figures}
        return Judgement(Verdict.WEDGED, last.check, f"{last.detail} ({len(misses)} in a row)", figures)

    def _failing(self) -> Judgement | None:
        errors = max(self._errors.values(), key=len, default=[])
        if len(errors) >= self.rules.errors_after:
            last = errors[-1]
            return Judgement(
                Verdict.FAILING,
                last.check,
                f"{last.detail} ({len(errors)} in a row)",
                {"errors": len(errors), **last.figures},
            )
        traffic = self._streaks.get(Check.TRAFFIC, [])
        if len(traffic) >= self.rules.windows_after:
            return Judgement(Verdict.FAILING, Check.TRAFFIC, traffic[-1].detail, traffic[-1].figures)
        return None

    def _starving(self) -> Judgement | None:
        memory = self._streaks.get(Check.HOST_MEMORY, [])
        if len(memory) >= self.rules.windows_after:
            return Judgement(Verdict.STARVING, Check.HOST_MEMORY, memory[-1].detail, memory[-1].figures)
        return self._latched

    def _degraded(self) -> Judgement | None:
        if not self._standing:
            return None
        worst = self._standing.get(Check.PROCESS) or next(iter(self._standing.values()))
        return Judgement(Verdict.DEGRADED, worst.check, worst.detail, worst.figures)

    def _process_detail(self) -> str | None:
        standing = self._standing.get(Check.PROCESS)
        return standing.detail if standing is not None else None
