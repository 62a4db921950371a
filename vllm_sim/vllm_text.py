"""The vLLM message texts the engine startup fills in (vllm-facts.md §2-§5), apart from the phase logic."""

from __future__ import annotations

from collections.abc import Callable

from vllm_sim.memory import CONTEXT_GIB, MemoryPlan


def compile_cache_dir(tag: str, rank: int) -> str:
    return (
        f"{tag}Using cache directory: /root/.cache/vllm/torch_compile_cache/3f2a9c1d7e/rank_{rank}_0/"
        "backbone for vLLM's torch.compile"
    )


def cudagraph_profiler_note(util: float, delta: float) -> str:
    """`gpu_worker.py:787`: what the util would be without CUDA-graph memory profiling."""
    return (
        "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
        f"--gpu-memory-utilization={util:.4f} is equivalent to --gpu-memory-utilization={util - delta:.4f} "
        "without CUDA graph memory profiling. To maintain the same effective KV cache size as before, "
        f"increase --gpu-memory-utilization to {util + delta:.4f}. To disable, set "
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
    )


def kv_size_lines(one_line: bool, tokens: int, max_len: int, concurrency: float) -> list[tuple[str, str]]:
    """(source key, text): one line in 0.33, two in older vLLM (vllm-facts.md §11); thousands separators."""
    size = f"GPU KV cache size: {tokens:,} tokens"
    conc = f"Maximum concurrency for {max_len:,} tokens per request: {concurrency:.2f}x"
    if one_line:
        return [("kv_size", f"{size}, {conc}")]
    return [("kv_size", size), ("kv_conc", conc)]


def capture_skipped(runner: str) -> str:
    """The WARNING when cudagraph_mode is NONE without --enforce-eager (V2 and V1 runners differ)."""
    if runner == "V2":
        return (
            "Skipping encoder and decoder CUDA graph capture. To enable encoder capture, ensure "
            "`cudagraph_mm_encoder` is enabled; to enable decoder capture, ensure `cudagraph_mode` is "
            "not `NONE`."
        )
    return (
        "Skipping CUDA graph capture. To turn on CUDA graph capture, ensure `cudagraph_mode` was not "
        "manually set to `NONE`"
    )


def kv_given(mem: MemoryPlan, gib: Callable[[float], str]) -> str:
    """`--kv-cache-memory-bytes`: 0.26.0's gpu_worker.py:479 line (record/kv-small), profiling skipped."""
    return (
        f"Initial free memory {gib(mem.free_gib - CONTEXT_GIB)} GiB, reserved {gib(mem.kv_gib)} GiB memory "
        "for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling. This does "
        "not respect the gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want "
        "manual control of KV cache memory size. If OOM'ed, check the difference of initial free memory "
        "between the current run and the previous run where kv_cache_memory_bytes is suggested and update "
        "it correspondingly."
    )


def graph_pool(gib: float, rounded: bool = False) -> str:
    """`rounded`: 0.26 prints `format_gib` values (`0.04`, `0.0`), 0.33 two decimals."""
    if rounded:
        return (
            f"CUDA graph pool memory: {round(gib, 2)} GiB (actual), {round(gib, 2)} GiB (estimated), "
            "difference: 0.0 GiB (0.0%)."
        )
    return (
        f"CUDA graph pool memory: {gib:.2f} GiB (actual), {gib:.2f} GiB (estimated), "
        "difference: 0.00 GiB (0.0%)."
    )


def cuda_oom(total_gib: float, used_gib: float) -> str:
    free = max(total_gib - used_gib, 0.01)
    return (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of "
        f"{total_gib:.2f} GiB of which {free:.2f} GiB is free. Including non-PyTorch memory, this "
        "process has "
        f"{used_gib:.2f} GiB memory in use."
    )
