"""The CUDA graphs vLLM captures for a configuration — one rule for the gate, the dry run and the simulator.

Facts, checked in vLLM's source at the v0.26.0 tag (file:line there; docs/simulator.md has the table):
- default max capture size = min(max_num_seqs × decode_query_len × 2, 512), capped at
  max_num_batched_tokens; default sizes = [1, 2, 4] + 8..248 step 8 + 256..max step 16, plus
  max_num_batched_tokens and max_num_seqs when ≤ max (vllm-facts.md §3);
- user sizes are de-duplicated, those > max_num_batched_tokens dropped, sorted ascending;
- the engine-config line prints these sizes; what the model runner then captures depends on it:
  - V1 runner (`config/compilation.py:1465-1474`, `adjust_cudagraph_sizes_for_spec_decode` at
    :1503): when the decode mode is FULL and decode_query_len q = 1 + k > 1, every size is rounded
    UP to a multiple of q, those above the max dropped, [q] kept when nothing is left; PIECEWISE
    graphs for every rounded size, FULL decode graphs for those in [q, max_num_seqs × q]
    (`v1/cudagraph_dispatcher.py:189-231`). 0.26.0 with ngram k=2 printed [1, 2, 4, 8] and
    captured [3, 6] (tests/data/real-vllm-0.26/tiny-ngram.log);
  - V2 runner (`v1/worker/gpu/cudagraph_utils.py:176-245`): no rounding of the sizes; PIECEWISE
    graphs for every size as given, FULL decode graphs for each size rounded up to a multiple of q,
    kept when ≤ max_num_seqs × q and ≤ the max, de-duplicated;
- which runner: V2 takes speculative methods eagle, eagle3, mtp, dflash and dspark; any other
  (ngram, ngram_gpu, draft_model, suffix, …) falls back to V1 (`config/vllm.py:2154-2165`);
  `VLLM_USE_V2_MODEL_RUNNER=0/1` forces one (`config/vllm.py:551`);
- `--enforce-eager` captures nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_MAX_CAPTURE_CEILING = 512
DEFAULT_MODE = "FULL_AND_PIECEWISE"  # -O2, vLLM's default optimization level
# vLLM's default max_num_seqs on a GPU: 256, or 1024 with ≥ 70 GiB (0.26.0 engine/arg_utils.py:2460-2477)
DEFAULT_MAX_NUM_SEQS_FLOOR = 256
V2_SPEC_METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
_MIXED_MODE = {"PIECEWISE": "PIECEWISE", "FULL": "FULL", "FULL_AND_PIECEWISE": "PIECEWISE"}
_SEPARATE_DECODE = ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")


@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """What a profile says about capture; None where vLLM would pick a hardware-dependent default."""

    sizes: tuple[int, ...] | None = None
    max_capture_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    num_speculative_tokens: int = 0
    enforce_eager: bool = False
    spec_method: str | None = None
    cudagraph_mode: str | None = None  # None: vLLM's default
    runner: str | None = None  # "V1" | "V2" forced by VLLM_USE_V2_MODEL_RUNNER, else None

    @property
    def decode_query_len(self) -> int:
        return 1 + max(0, self.num_speculative_tokens)

    @property
    def model_runner(self) -> str:
        """The runner vLLM 0.26.0 picks for this drafting method (a hybrid model also takes V1)."""
        return self.runner or spec_runner(self.spec_method if self.num_speculative_tokens else None)

    @property
    def mode(self) -> str:
        return (self.cudagraph_mode or DEFAULT_MODE).upper()


def spec_runner(method: str | None) -> str:
    """V2 unless the drafting method is one V2 does not support (0.26.0 `config/vllm.py:2154`); a
    model's own MTP name (`qwen3_next_mtp`, `deepseek_mtp`, …) is `mtp` (`config/speculative.py:686`)."""
    if method is not None and method.endswith("_mtp"):
        method = "mtp"
    return "V2" if method is None or method in V2_SPEC_METHODS else "V1"


def runner_from_env(value: str | None) -> str | None:
    """`VLLM_USE_V2_MODEL_RUNNER`: "0"/"false" forces V1, "1"/"true" V2, unset leaves vLLM's choice."""
    if value is None:
        return None
    return "V2" if value.strip().lower() in ("1", "true") else "V1"


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
    if top is None:
        return None
    mnbt, seqs = config.max_num_batched_tokens, config.max_num_seqs
    return default_sizes(top, [v for v in (mnbt, seqs) if v is not None])


def expected_capture_sizes(config: CaptureConfig) -> list[int] | None:
    """The sizes the runner captures mixed batches at (after V1's rounding), None if hardware-dependent."""
    sizes = configured_capture_sizes(config)
    if not sizes:
        return sizes
    return runner_sizes(
        sizes, config.model_runner, config.mode, config.decode_query_len, capture_max(config, sizes)
    )


def expected_graphs(config: CaptureConfig) -> dict[str, list[int]] | None:
    """Graph sizes per runtime mode (PIECEWISE, FULL) the runner captures; None if hardware-dependent."""
    sizes = configured_capture_sizes(config)
    if sizes is None:
        return None
    return graphs_by_mode(
        sizes,
        mode=config.mode,
        runner=config.model_runner,
        query_len=config.decode_query_len,
        max_num_seqs=config.max_num_seqs,
        max_size=capture_max(config, sizes),
    )


def capture_max(config: CaptureConfig, sizes: list[int]) -> int:
    """`max_cudagraph_capture_size`: the largest given size, else the default max (it may exceed the
    largest default size: max_num_seqs=1 with k=2 gives max 6, sizes [1, 2, 4])."""
    if config.sizes is not None or config.enforce_eager:
        return max(sizes, default=0)
    return _default_max(config) or max(sizes, default=0)


def default_sizes(top: int, extras: list[int], interactivity: bool = False) -> list[int]:
    """vLLM's default capture sizes up to `top` (`--performance-mode interactivity`: 1..32 dense)."""
    head = set(range(1, min(top, 32) + 1)) if interactivity else {1, 2, 4}
    sizes = head | set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    sizes |= {v for v in extras if v <= top}
    return sorted(s for s in sizes if s <= top)


def runner_sizes(
    sizes: list[int], runner: str, mode: str, query_len: int, max_size: int | None = None
) -> list[int]:
    """The sizes after the V1 runner's spec-decode rounding (V2 keeps them as the config has them)."""
    decode_full = mode.upper() in ("FULL", *_SEPARATE_DECODE)
    if runner != "V1" or not decode_full or query_len <= 1 or not sizes:
        return list(sizes)
    return round_for_spec_decode(sizes, max_size or max(sizes), query_len)


def round_for_spec_decode(sizes: list[int], top: int, multiple: int) -> list[int]:
    """`adjust_cudagraph_sizes_for_spec_decode`: up to multiples, ≤ top, de-duplicated; else [multiple]."""
    if not sizes or multiple <= 1:
        return list(sizes)
    rounded = sorted({_round_up(s, multiple) for s in sizes} - {0})
    rounded = [s for s in rounded if s <= top]
    if not rounded and multiple <= top:
        return [multiple]
    return rounded


def graphs_by_mode(
    sizes: list[int],
    *,
    mode: str,
    runner: str,
    query_len: int,
    max_num_seqs: int | None,
    max_size: int | None = None,
) -> dict[str, list[int]]:
    """Per runtime mode, the sizes captured from the config's sizes (see the module docstring)."""
    mode = mode.upper()
    kept = runner_sizes(sizes, runner, mode, query_len, max_size)
    top = max(kept, default=0) if runner == "V1" else (max_size or max(kept, default=0))
    limit = max_num_seqs * query_len if max_num_seqs else None
    graphs: dict[str, list[int]] = {}
    mixed = _MIXED_MODE.get(mode)
    if mixed is not None:
        graphs[mixed] = list(kept)
    if mode in _SEPARATE_DECODE:
        graphs["FULL"] = _full_decode_sizes(kept, runner, query_len, top, limit)
    return graphs


def _full_decode_sizes(
    kept: list[int], runner: str, query_len: int, top: int, limit: int | None
) -> list[int]:
    """The FULL graphs of uniform decode batches, none above `limit` tokens: V1 keeps the sizes that
    hold one query, V2 rounds each up to a multiple of the query length (≤ top)."""
    cap = math.inf if limit is None else limit
    if runner == "V1":
        return [s for s in kept if query_len <= s <= cap]
    rounded = {_round_up(s, query_len) for s in kept}
    return sorted(s for s in rounded if s <= min(top, cap))


def graph_ceiling_seqs(graphs: dict[str, list[int]], query_len: int) -> int:
    """The most sequences a uniform decode batch can hold and still replay a graph (0: none)."""
    largest = max((s for sizes in graphs.values() for s in sizes), default=0)
    return largest // max(1, query_len)


def _round_up(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


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


def decode_reachable(sizes: list[int], config: CaptureConfig) -> tuple[list[int], list[int]]:
    """Split sizes into those a decode batch can reach and those it never will (> max_num_seqs × q)."""
    if config.max_num_seqs is None:
        return sizes, []
    limit = config.max_num_seqs * config.decode_query_len
    return [s for s in sizes if s <= limit], [s for s in sizes if s > limit]
