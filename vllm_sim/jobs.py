"""One request inside the simulated engine, and what an engine step hands back to its handler."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from vllm_sim.generation import Plan


@dataclass(frozen=True, slots=True)
class Step:
    """Tokens `plan.tokens[start:start+count]` came out at the end of one engine step."""

    start: int
    count: int
    done: bool


@dataclass(eq=False)
class Job:
    """One request inside the engine (mutable: the scheduler advances it, and may replace its plan
    when the engine ends it early or its model or cache is garbage)."""

    rid: str
    prompt_ids: list[int]
    plan: Plan
    prompt_words: frozenset[str]
    arrival: float = field(default_factory=time.monotonic)
    out: asyncio.Queue[Step | None] = field(default_factory=asyncio.Queue)
    cached: int = 0
    prefill_left: int = -1
    emitted: int = 0
    admitted_at: float | None = None
    first_at: float | None = None
    last_at: float | None = None
    finished: bool = False
    fails: bool = False  # `--sim-error-after-requests`: the engine ends it with finish_reason error
    max_tokens: int = 0  # the request's limit, for vllm:request_params_max_tokens

    @property
    def total(self) -> int:
        return len(self.plan.tokens)


@dataclass(frozen=True, slots=True)
class StepWork:
    """What the engine core is told about a step it must run: enough for its faults to decide."""

    seq: int
    generated: int  # tokens generated before this step
    finished: int  # requests finished before this step
    decoding: int  # requests this step decodes (they ran in the step before)
