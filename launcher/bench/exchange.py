"""One HTTP exchange as the client saw it: when it was sent, and every network chunk with its arrival time.

Kept raw on purpose: the client's only per-chunk work is `time.monotonic()` and an append, so the
timestamps are as close to the socket as Python gets; meaning is extracted afterwards (`sse.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    PROBE = "probe"  # tokenizer calibration, max_tokens 1
    COLD = "cold"  # a unique prefix, measured alone
    WARMUP = "warmup"  # every prompt of the set once, not timed
    TIMED = "timed"  # the rounds


@dataclass(frozen=True, slots=True)
class Tag:
    """Where a request belongs in the run."""

    phase: Phase
    context: str
    concurrency: int = 1
    round: int = 0
    prompt: int = 0
    copy: int = 0


@dataclass(frozen=True, slots=True)
class Exchange:
    tag: Tag
    request_id: str
    t_send: float
    t_end: float
    status: int
    chunks: tuple[tuple[float, bytes], ...]
    error: str | None = None
