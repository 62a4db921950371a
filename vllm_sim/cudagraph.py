"""Which CUDA graphs vLLM would capture: the mode (vllm-facts.md §3) and, for the sizes, the one rule module
the gate and the dry run use too (`vllm_flags/cudagraph_sizes.py`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from vllm_flags import cudagraph_sizes as rule

DEFAULT_CEILING = rule.DEFAULT_MAX_CAPTURE_CEILING


class GraphMode(StrEnum):
    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"

    @property
    def enum_value(self) -> str:
        """The value inside `<CUDAGraphMode.X: v>` in the engine config line."""
        return {
            "NONE": "0",
            "PIECEWISE": "1",
            "FULL": "2",
            "FULL_DECODE_ONLY": "(2, 0)",
            "FULL_AND_PIECEWISE": "(2, 1)",
        }[self.value]


class GraphConfigError(ValueError):
    """vLLM refuses the compilation config (raised at config time, in the API process)."""


@dataclass(frozen=True, slots=True)
class GraphPlan:
    """The capture vLLM would do: mode, sizes, and the warnings it prints on the way."""

    mode: GraphMode
    sizes: tuple[int, ...]
    max_size: int
    decode_limit: int  # FULL graphs of uniform decode batches only go up to this many tokens
    compile_mode: int  # CompilationMode: 0 NONE, 3 VLLM_COMPILE
    warnings: tuple[str, ...] = ()
    runner: str = "V2"  # the model runner that captures: V1 rounds every size for spec decode
    query_len: int = 1  # decode query length, 1 + speculative tokens

    def _graphs(self) -> dict[str, list[int]]:
        seqs = self.decode_limit // self.query_len
        return rule.graphs_by_mode(
            list(self.sizes),
            mode=self.mode.value,
            runner=self.runner,
            query_len=self.query_len,
            max_num_seqs=seqs,
            max_size=self.max_size,
        )

    @property
    def piecewise_sizes(self) -> tuple[int, ...]:
        return tuple(self._graphs().get("PIECEWISE", ()))

    @property
    def full_sizes(self) -> tuple[int, ...]:
        return tuple(self._graphs().get("FULL", ()))

    def covers(self, tokens: int) -> bool:
        """Whether a decode batch of this many tokens replays a graph (else it runs eager)."""
        sizes = self.full_sizes or self.piecewise_sizes
        return bool(sizes) and tokens <= max(sizes)


def default_sizes(max_size: int, max_num_seqs: int, mnbt: int, interactivity: bool) -> list[int]:
    return rule.default_sizes(max_size, [mnbt, max_num_seqs], interactivity)


def plan_graphs(
    *,
    optimization_level: int,
    compilation_config: dict[str, Any],
    enforce_eager: bool,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    spec_tokens: int,
    performance_mode: str | None,
    user_sizes: list[int] | None,
    user_max: int | None,
) -> GraphPlan:
    decode_query_len = 1 + spec_tokens
    decode_limit = max_num_seqs * decode_query_len
    if enforce_eager:
        return GraphPlan(GraphMode.NONE, (), 0, decode_limit, 0, query_len=decode_query_len)
    mode = _mode(optimization_level, compilation_config)
    compile_mode = 0 if optimization_level == 0 else 3
    sizes_given = user_sizes if user_sizes is not None else compilation_config.get("cudagraph_capture_sizes")
    max_given = user_max if user_max is not None else compilation_config.get("max_cudagraph_capture_size")
    if sizes_given is not None:
        sizes, top, warnings = _sizes_given(sizes_given, max_given, max_num_batched_tokens)
    else:
        interactivity = performance_mode == "interactivity"
        sizes, top, warnings = _sizes_by_default(
            max_given, max_num_seqs, max_num_batched_tokens, decode_query_len, interactivity
        )
        sizes = [] if mode == GraphMode.NONE else sizes
    return GraphPlan(
        mode,
        tuple(sizes),
        top if sizes else 0,
        decode_limit,
        compile_mode,
        tuple(warnings),
        query_len=decode_query_len,
    )


def _sizes_given(
    sizes_given: list[Any], max_given: Any, max_num_batched_tokens: int
) -> tuple[list[int], int, list[str]]:
    """The sizes the user gave as vLLM keeps them (unique, sorted, none above the token budget),
    their largest, and the warning when that changed them; a max beside them must be their largest."""
    given = [int(s) for s in sizes_given]
    sizes = sorted({s for s in given if s <= max_num_batched_tokens})
    warnings = []
    if sizes != given:
        warnings.append(
            f"cudagraph_capture_sizes specified in compilation_config {given} is overridden by config {sizes}"
        )
    top = max(sizes) if sizes else 0
    if max_given is not None and int(max_given) != top:
        raise GraphConfigError(
            f"customized max_cudagraph_capture_size(={max_given}) should be consistent with the max "
            "value "
            f"of cudagraph_capture_sizes(={top})"
        )
    return sizes, top, warnings


def _sizes_by_default(
    max_given: Any, max_num_seqs: int, max_num_batched_tokens: int, decode_query_len: int, interactivity: bool
) -> tuple[list[int], int, list[str]]:
    """vLLM's own sizes up to the max given, else twice the largest decode batch (capped), and never
    above the token budget (with its warning when it truncates)."""
    decode_tokens = max_num_seqs * decode_query_len
    top = int(max_given) if max_given is not None else min(decode_tokens * 2, DEFAULT_CEILING)
    warnings = []
    if top > max_num_batched_tokens:
        warnings.append(f"Truncating max_cudagraph_capture_size to {max_num_batched_tokens}")
        top = max_num_batched_tokens
    return default_sizes(top, max_num_seqs, max_num_batched_tokens, interactivity), top, warnings


def _mode(optimization_level: int, compilation_config: dict[str, Any]) -> GraphMode:
    given = compilation_config.get("cudagraph_mode")
    if given is not None:
        try:
            return GraphMode[str(given).upper()]
        except KeyError as err:
            raise GraphConfigError(f"Invalid cudagraph_mode: {given!r}") from err
    if optimization_level == 0:
        return GraphMode.NONE
    if optimization_level == 1:
        return GraphMode.PIECEWISE
    return GraphMode.FULL_AND_PIECEWISE


def fallback_plan(plan: GraphPlan) -> GraphPlan:
    """The `--sim-capture-fallback` fault: sizes silently become [1, 2] (a fork's default, field notes)."""
    return replace(plan, sizes=(1, 2), max_size=2)


def eager_plan(plan: GraphPlan) -> GraphPlan:
    """The `--sim-eager-fallback` fault: compile mode 0 forces cudagraph_mode NONE, unasked."""
    return replace(plan, mode=GraphMode.NONE, sizes=(), max_size=0, compile_mode=0)


def for_runner(plan: GraphPlan, runner: str, query_len: int) -> GraphPlan:
    """What `runner` captures from the config's plan (the config line shows `plan`): the V1 runner
    rounds every size to a multiple of 1 + k (0.26.0, ngram k = 2: [1, 2, 4, 8] → [3, 6]); V2 keeps
    them and rounds only its FULL decode graphs (`vllm_flags/cudagraph_sizes.py`)."""
    sizes = rule.runner_sizes(list(plan.sizes), runner, plan.mode.value, query_len, plan.max_size)
    top = max(sizes) if runner == "V1" and sizes else plan.max_size
    return replace(plan, sizes=tuple(sizes), max_size=top, runner=runner, query_len=query_len)
