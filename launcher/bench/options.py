"""The bench's settings, declared once with their defaults (the CLI builds one from its flags)."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.bench.workload import ContextSpec, parse_contexts
from launcher.errors import BadInput

DEFAULT_CONCURRENCY = (1, 2, 4, 8)
DEFAULT_CONTEXTS = "short,8k"


@dataclass(frozen=True, slots=True)
class BenchOptions:
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    contexts: tuple[ContextSpec, ...] = parse_contexts(DEFAULT_CONTEXTS)
    rounds: int = 3  # timed rounds per cell; cell values are their medians
    max_tokens: int = 512  # per request; reasoning models want >= 1024
    prompts: int = 8  # distinct prompts in the set every level runs
    temperature: float = 0.7  # > 0 with a seed per (prompt, copy): reproducible, varied
    seed: int = 1
    request_timeout_s: float = 900.0  # per read; a cold 64K prefill can take minutes
    probe_tokens: int = 1500  # size of the tokenizer-calibration sample (estimated tokens)


def parse_concurrency(text: str) -> tuple[int, ...]:
    try:
        levels = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError as err:
        raise BadInput(
            f"--concurrency {text!r}: not a list of integers", hint="e.g. --concurrency 1,2,4,8"
        ) from err
    if not levels or levels[0] < 1:
        raise BadInput(f"--concurrency {text!r}: levels must be >= 1", hint="e.g. --concurrency 1,2,4,8")
    return tuple(levels)
