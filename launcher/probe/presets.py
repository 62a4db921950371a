"""The bench an arm runs: a named preset, then any of `launch bench`'s knobs over it."""

from __future__ import annotations

from dataclasses import replace

from launcher.bench.options import BenchOptions, parse_concurrency
from launcher.bench.workload import parse_contexts
from launcher.errors import BadInput

PRESETS: dict[str, BenchOptions] = {
    # Minutes per arm on a real model: one short context, a single user and a small crowd.
    "quick": BenchOptions(
        concurrency=(1, 4), contexts=parse_contexts("short"), rounds=3, max_tokens=256, prompts=4
    ),
    # `launch bench`'s own defaults: short and 8k, concurrency 1 to 8.
    "standard": BenchOptions(),
}


def bench_options(
    preset: str,
    *,
    concurrency: str | None = None,
    contexts: str | None = None,
    rounds: int | None = None,
    max_tokens: int | None = None,
    prompts: int | None = None,
) -> BenchOptions:
    if preset not in PRESETS:
        raise BadInput(f"--bench {preset!r} is not a preset", hint="one of: " + ", ".join(PRESETS))
    options = PRESETS[preset]
    if concurrency is not None:
        options = replace(options, concurrency=parse_concurrency(concurrency))
    if contexts is not None:
        options = replace(options, contexts=parse_contexts(contexts))
    if rounds is not None:
        options = replace(options, rounds=rounds)
    if max_tokens is not None:
        options = replace(options, max_tokens=max_tokens)
    if prompts is not None:
        options = replace(options, prompts=prompts)
    return options
