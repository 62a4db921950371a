"""The simulated GPU memory budget: weights, activations, graphs and what is left for the KV cache.

requested   = util x total                                   (per GPU)
weights     = --sim-weights-gib, else 2 bytes/param from the model name (8B -> 14.9 GiB), / TP
activations = 0.2 + (mnbt / 8192) x (0.4 + 0.08 x params_B) / TP
graphs      = 0.006 GiB x graphs captured x sqrt(max(1, params_B / 8))   (0 when eager)
kv          = requested - weights - activations - graphs - 0.3 (CUDA context)
kv tokens   = floor(kv / (bytes_per_token / TP) / block) x block; bytes_per_token = 18432 x params_B
              (Qwen3-8B: 147456), halved for fp8 KV
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

GIB = 1024**3
CONTEXT_GIB = 0.3
GRAPH_GIB_EACH = 0.006
_PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")
_QUANT4 = re.compile(r"awq|gptq|int4|4bit|w4a16|iq4|q4_|nf4", re.IGNORECASE)
_QUANT8 = re.compile(r"fp8|int8|8bit|w8a8", re.IGNORECASE)


def params_b(model: str) -> float | None:
    """Parameters in billions read from a model name (`Qwen/Qwen3-8B` → 8.0), None if absent. A
    mixture-of-experts name gives its total and its active count (`Qwen3-30B-A3B`): the total is what
    is loaded."""
    found = _PARAMS.findall(model.rsplit("/", 1)[-1])
    return max(float(size) for size in found) if found else None


def weights_gib(model: str, override: float | None) -> float:
    if override is not None:
        return override
    params = params_b(model)
    if params is None:
        return 1.0
    size = params * 1e9 * 2 / GIB
    if _QUANT4.search(model):
        size *= 0.28
    elif _QUANT8.search(model):
        size *= 0.5
    return size


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """One rank's memory budget (every rank of a TP group is alike)."""

    total_gib: float
    free_gib: float
    util: float
    requested_gib: float
    weights_gib: float
    activation_gib: float
    graph_gib: float
    kv_gib: float
    kv_tokens: int
    bytes_per_token: int
    block_size: int
    max_model_len: int

    @property
    def num_blocks(self) -> int:
        return self.kv_tokens // self.block_size

    @property
    def concurrency(self) -> float:
        return self.kv_tokens / self.max_model_len

    def free_memory_error(self, device: int, gib: Callable[[float], str] = "{:.2f}".format) -> str | None:
        """vLLM's `request_memory` refusal (vllm-facts.md §5.2), or None when there is enough; `gib` formats
        GiB as the dialect does."""
        if self.free_gib >= self.requested_gib:
            return None
        return (
            f"ValueError: Free memory on device cuda:{device} "
            f"({gib(self.free_gib)}/{gib(self.total_gib)} GiB) "
            f"on startup is less than desired GPU memory utilization ({self.util}, "
            f"{gib(self.requested_gib)} GiB)."
            " Decrease GPU memory utilization or reduce GPU memory used by other processes."
        )

    def kv_error(self) -> str | None:
        """The KV-cache refusals of `kv_cache_planning.py` (vllm-facts.md §5.2), or None."""
        if self.kv_gib <= 0:
            return (
                "ValueError: No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` "
                "when initializing the engine (this flag also controls CPU memory reservation on the CPU "
                "backend, despite its name). See https://docs.vllm.ai/en/latest/configuration/"
                "conserving_memory/ for more details."
            )
        if self.kv_tokens >= self.max_model_len:
            return None
        need = self.max_model_len * self.bytes_per_token / GIB
        estimate = self.kv_tokens
        based = (
            f" Based on the available memory, the estimated maximum model length is {estimate}."
            if estimate > 0
            else ""
        )
        return (
            f"ValueError: To serve at least one request with the model's max seq len ({self.max_model_len}), "
            f"({round(need, 2)} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({round(self.kv_gib, 2)} GiB).{based} Try increasing `gpu_memory_utilization` (which also "
            "controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the "
            "engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )


def plan_memory(
    *,
    model: str,
    total_gib: float,
    free_gib: float | None,
    util: float,
    tp: int,
    weights_override: float | None,
    bytes_per_token_override: int | None,
    kv_dtype: str,
    mnbt: int,
    graphs: int,
    block_size: int,
    max_model_len: int,
    kv_bytes: int | None = None,
) -> MemoryPlan:
    """`kv_bytes`: `--kv-cache-memory-bytes`, the KV cache's size as given (vLLM then skips profiling)."""
    params = params_b(model) or 1.0
    weights = weights_gib(model, weights_override) / tp
    activation = 0.2 + (mnbt / 8192) * (0.4 + 0.08 * params) / tp
    graph = GRAPH_GIB_EACH * graphs * math.sqrt(max(1.0, params / 8))
    requested = util * total_gib
    kv = requested - weights - activation - graph - CONTEXT_GIB if kv_bytes is None else kv_bytes / GIB
    per_token = bytes_per_token_override or int(18432 * params)
    if kv_dtype.startswith(("fp8", "int8", "nvfp4", "int4")):
        per_token //= 2
    rank_bytes = max(1, per_token // tp)
    tokens = int(max(0.0, kv) * GIB // rank_bytes) // block_size * block_size
    return MemoryPlan(
        total_gib=total_gib,
        free_gib=total_gib if free_gib is None else free_gib,
        util=util,
        requested_gib=requested,
        weights_gib=weights,
        activation_gib=activation,
        graph_gib=graph,
        kv_gib=kv,
        kv_tokens=tokens,
        bytes_per_token=per_token,
        block_size=block_size,
        max_model_len=max_model_len,
    )
