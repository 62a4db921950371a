"""The CUDA-graph capture sizes vLLM will keep for a configuration — vLLM's own filtering rule.

Facts (vLLM 0.33 `config/vllm.py` and `config/compilation.py`; FACTS.md §3):
- default max capture size = min(max_num_seqs × decode_query_len × 2, 512), capped at
  max_num_batched_tokens; default sizes = [1, 2, 4] + 8..248 step 8 + 256..max step 16, plus
  max_num_batched_tokens and max_num_seqs when ≤ max;
- user sizes are de-duplicated, those > max_num_batched_tokens dropped, sorted ascending;
- with speculative decoding (decode_query_len = 1 + num_speculative_tokens > 1),
  `adjust_cudagraph_sizes_for_spec_decode` rounds every size UP to a multiple of the query length,
  drops those above the max, and falls back to [query_len] when nothing is left;
- `--enforce-eager` captures nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_CAPTURE_CEILING = 512


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """What a profile says about capture; None where vLLM would pick a hardware-dependent default."""

    sizes: tuple[int, ...] | None = None
    max_capture_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    num_speculative_tokens: int = 0
    enforce_eager: bool = False

    @property
    def decode_query_len(self) -> int:
        return 1 + max(0, self.num_speculative_tokens)


def configured_capture_sizes(config: CaptureConfig) -> list[int] | None:
    """The sizes of vLLM's compilation config — what its engine-config log line prints.

    Rounding for speculative decoding happens later, in the model runner, so the log line shows
    these (seen with vLLM 0.26.0 and ngram: the line said [1, 2, 4, 8], the runner captured [3, 6]).
    """
    if config.enforce_eager:
        return []
    if config.sizes is not None:
        sizes = sorted({s for s in config.sizes if s > 0})
        if config.max_num_batched_tokens is not None:
            sizes = [s for s in sizes if s <= config.max_num_batched_tokens]
        return sizes
    top = _default_max(config)
    return None if top is None else _default_sizes(config, top)


def expected_capture_sizes(config: CaptureConfig) -> list[int] | None:
    """The sizes vLLM will capture, or None when they depend on the hardware (no max_num_seqs)."""
    sizes = configured_capture_sizes(config)
    if not sizes:
        return sizes
    return _round_for_spec_decode(sizes, max(sizes), config.decode_query_len)


def _default_max(config: CaptureConfig) -> int | None:
    if config.max_capture_size is not None:
        top = config.max_capture_size
    elif config.max_num_seqs is None:
        return None
    else:
        top = min(config.max_num_seqs * config.decode_query_len * 2, DEFAULT_MAX_CAPTURE_CEILING)
    if config.max_num_batched_tokens is not None:
        top = min(top, config.max_num_batched_tokens)
    return top


def _default_sizes(config: CaptureConfig, top: int) -> list[int]:
    sizes = {1, 2, 4, *range(8, min(top + 1, 256), 8), *range(256, top + 1, 16)}
    for extra in (config.max_num_batched_tokens, config.max_num_seqs):
        if extra is not None and extra <= top:
            sizes.add(extra)
    return sorted(s for s in sizes if s <= top)


def _round_for_spec_decode(sizes: list[int], top: int, multiple: int) -> list[int]:
    if not sizes or multiple <= 1:
        return sizes
    rounded = sorted({-(-s // multiple) * multiple for s in sizes} - {0})
    rounded = [s for s in rounded if s <= top]
    if not rounded and multiple <= top:
        return [multiple]
    return rounded


def decode_reachable(sizes: list[int], config: CaptureConfig) -> tuple[list[int], list[int]]:
    """Split sizes into those a decode batch can reach and those it never will (> max_num_seqs × q)."""
    if config.max_num_seqs is None:
        return sizes, []
    limit = config.max_num_seqs * config.decode_query_len
    return [s for s in sizes if s <= limit], [s for s in sizes if s > limit]
