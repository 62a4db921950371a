"""Which CUDA graphs vLLM 0.33 would capture: the mode and the size rules of FACTS §3."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

DEFAULT_CEILING = 512


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

    @property
    def piecewise_sizes(self) -> tuple[int, ...]:
        if self.mode in (GraphMode.PIECEWISE, GraphMode.FULL_AND_PIECEWISE):
            return self.sizes
        return ()

    @property
    def full_sizes(self) -> tuple[int, ...]:
        if self.mode == GraphMode.FULL:
            return self.sizes
        if self.mode in (GraphMode.FULL_DECODE_ONLY, GraphMode.FULL_AND_PIECEWISE):
            return tuple(s for s in self.sizes if s <= self.decode_limit)
        return ()

    def covers(self, tokens: int) -> bool:
        """Whether a decode batch of this many tokens replays a graph (else it runs eager)."""
        sizes = self.full_sizes or self.piecewise_sizes
        return bool(sizes) and tokens <= max(sizes)


def default_sizes(max_size: int, max_num_seqs: int, mnbt: int, interactivity: bool) -> list[int]:
    head = list(range(1, min(max_size, 32) + 1)) if interactivity else [1, 2, 4]
    sizes = head + list(range(8, min(max_size + 1, 256), 8)) + list(range(256, max_size + 1, 16))
    sizes += [v for v in (mnbt, max_num_seqs) if v <= max_size]
    return sorted({s for s in sizes if s <= max_size})


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
        return GraphPlan(GraphMode.NONE, (), 0, decode_limit, 0)
    mode = _mode(optimization_level, compilation_config)
    compile_mode = 0 if optimization_level == 0 else 3
    sizes_given = user_sizes if user_sizes is not None else compilation_config.get("cudagraph_capture_sizes")
    max_given = user_max if user_max is not None else compilation_config.get("max_cudagraph_capture_size")
    warnings: list[str] = []
    if sizes_given is not None:
        given = [int(s) for s in sizes_given]
        sizes = sorted({s for s in given if s <= max_num_batched_tokens})
        if sizes != given:
            warnings.append(
                f"cudagraph_capture_sizes specified in compilation_config {given} is overridden by "
                f"config {sizes}"
            )
        top = max(sizes) if sizes else 0
        if max_given is not None and int(max_given) != top:
            raise GraphConfigError(
                f"customized max_cudagraph_capture_size(={max_given}) should be consistent with the max "
                "value "
                f"of cudagraph_capture_sizes(={top})"
            )
        return GraphPlan(mode, tuple(sizes), top, decode_limit, compile_mode, tuple(warnings))
    top = (
        int(max_given) if max_given is not None else min(max_num_seqs * decode_query_len * 2, DEFAULT_CEILING)
    )
    if top > max_num_batched_tokens:
        warnings.append(f"Truncating max_cudagraph_capture_size to {max_num_batched_tokens}")
        top = max_num_batched_tokens
    sizes = default_sizes(top, max_num_seqs, max_num_batched_tokens, performance_mode == "interactivity")
    if mode == GraphMode.NONE:
        return GraphPlan(mode, (), 0, decode_limit, compile_mode, tuple(warnings))
    return GraphPlan(mode, tuple(sizes), top, decode_limit, compile_mode, tuple(warnings))


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
    return GraphPlan(plan.mode, (1, 2), 2, plan.decode_limit, plan.compile_mode, plan.warnings)


def eager_plan(plan: GraphPlan) -> GraphPlan:
    """The `--sim-eager-fallback` fault: compile mode 0 forces cudagraph_mode NONE, unasked."""
    return GraphPlan(GraphMode.NONE, (), 0, plan.decode_limit, 0, plan.warnings)


def rounded_for_spec(plan: GraphPlan, query_len: int) -> GraphPlan:
    """vLLM's `adjust_cudagraph_sizes_for_spec_decode` (0.26's V1 runner, after the config line):
    each size rounded up to a multiple of 1 + k, kept if it stays ≤ the max, de-duplicated; the
    max becomes the largest kept. [1, 2, 4, 8] with k = 2 → [3, 6] (the real 0.26.0 run)."""
    if not plan.sizes or query_len <= 1:
        return plan
    rounded = {-(-s // query_len) * query_len for s in plan.sizes}
    kept = tuple(sorted(s for s in rounded if s <= plan.max_size))
    top = max(kept) if kept else 0
    return GraphPlan(plan.mode, kept, top, plan.decode_limit, plan.compile_mode, plan.warnings)
