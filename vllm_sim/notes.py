"""vLLM 0.26.0's informational lines: no gate reads them, but a log without them does not look real.

Texts and order are the real 0.26.0 runs' (`tests/data/real-vllm-0.26/`); values that depend on the
host (RAM, addresses, cache hashes) are plausible stand-ins. Only dialects with `notes` print them.
"""

from __future__ import annotations

import hashlib
import os
import resource

from vllm_sim.config import SimConfig
from vllm_sim.logline import LogWriter
from vllm_sim.memory import CONTEXT_GIB, GIB, MemoryPlan
from vllm_sim.ranks import Ranks
from vllm_sim.versions import Dialect

FD_TARGET = 65535  # vLLM raises the soft fd limit to this at start
IR_OP = (
    "Final IR op priority after setting platform defaults: "
    "IrOpPriorityConfig(rms_norm=['native'], fused_add_rms_norm=['native'])"
)
IR_OP_EAGER = IR_OP.replace("['native']", "['vllm_c', 'native']")  # record/eager
EAGER_026 = (  # config/vllm.py:1163, a WARNING in 0.26.0 (record/eager)
    "Enforce eager set, disabling torch.compile and CUDAGraphs. "
    "This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none"
)
INDUCTOR_OFF = (  # config/vllm.py:1213
    "Inductor compilation was disabled by user settings, optimizations settings that are only active "
    "during inductor compilation will be ignored."
)
THINKING_BUDGET = (  # config/vllm.py:2228, when a reasoning parser is set and V2 runs
    "Model Runner V2 does not yet support the thinking_token_budget request parameter. "
    "Set VLLM_USE_V2_MODEL_RUNNER=0 if this is required."
)
SAMPLER = "FlashInfer top-p/top-k sampling disabled via VLLM_USE_FLASHINFER_SAMPLER=0."


def _ngram(cfg: SimConfig) -> bool:
    return bool(cfg.spec_method and cfg.spec_method.startswith("ngram"))


def ulimit_warning(log: LogWriter, d: Dialect) -> None:
    """vLLM tries to raise the soft fd limit; when the hard limit is lower it warns (so do we)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= FD_TARGET:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_TARGET, hard))
    except ValueError as err:
        log.warning(
            d.src("ulimit"),
            f"Found ulimit of {soft} and failed to automatically increase with error {err}. This can "
            "cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider increasing "
            "with ulimit -n",
        )


def scheduling(log: LogWriter, cfg: SimConfig, d: Dialect, api: bool) -> None:
    """`Asynchronous scheduling is enabled.` and the IR op line: API config time and again after init."""
    if api and _ngram(cfg):
        log.warning(
            d.src("async_off"),
            "Async scheduling not supported with ngram-based speculative decoding and will be disabled.",
        )
    state = "disabled" if _ngram(cfg) else "enabled"
    log.info(d.src("async_sched"), f"Asynchronous scheduling is {state}.")
    if cfg.enforce_eager:
        log.warning(d.src("eager_note"), EAGER_026)
        log.warning(d.src("inductor_off"), INDUCTOR_OFF)
    log.info(d.src("ir_op"), IR_OP_EAGER if cfg.enforce_eager else IR_OP)
    if cfg.enforce_eager:
        log.info(d.src("eager_off"), "Cudagraph is disabled under eager mode")
        log.info(d.src("fusions"), "Enabled custom fusions: norm_quant, act_quant")
    if api and cfg.reasoning_parser and cfg.runner == "V2":
        log.warning(d.src("thinking_budget"), THINKING_BUDGET)


def runner_fallback(log: LogWriter, cfg: SimConfig, d: Dialect) -> None:
    if cfg.runner != d.runner:
        # 0.26.0 config/vllm.py:2156-2165 names ngram by its pair, any other method by itself
        what = (
            "ngram/ngram_gpu speculative decoding"
            if cfg.spec_method in ("ngram", "ngram_gpu")
            else f"speculative method '{cfg.spec_method}'"
        )
        log.warning(
            d.src("runner_fallback"),
            f"Model Runner V2 does not yet support {what}; using the V1 model runner instead.",
        )


def device(ranks: Ranks, cfg: SimConfig, d: Dialect) -> None:
    port = 20000 + os.getpid() % 40000
    world = cfg.tp
    ranks.log(
        "INFO",
        d.src("dist_init"),
        lambda r: (
            f"world_size={world} rank={r} local_rank={r} distributed_init_method=tcp://127.0.0.1:{port} "
            "backend=nccl"
        ),
    )
    ranks.log(
        "INFO",
        d.src("rank_assign"),
        lambda r: (
            f"rank {r} in world size {world} is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank {r}, "
            "EP rank N/A, EPLB rank N/A"
        ),
    )
    if cfg.runner == "V1":
        sampler(ranks, d)
        if cfg.spec_method:
            ranks.log(
                "WARNING",
                d.src("spec_params"),
                lambda r: "min_p and logit_bias parameters won't work with speculative decoding.",
            )


def sampler(ranks: Ranks, d: Dialect) -> None:
    if os.environ.get("VLLM_USE_FLASHINFER_SAMPLER") == "0":
        ranks.log("INFO", d.src("sampler"), lambda r: SAMPLER)


def attention(ranks: Ranks, mem: MemoryPlan, d: Dialect) -> None:
    """After the backend choice: FlashAttention's version and the checkpoint's filesystem."""
    ranks.log("INFO", d.src("fa_version"), lambda r: "Using FlashAttention version 3")
    size = mem.weights_gib
    ranks.log(
        "INFO",
        d.src("fs_type"),
        lambda r: (
            f"Filesystem type for checkpoints: EXT4. Checkpoint size: {size:.2f} GiB. Available RAM: "
            "123.12 GiB."
        ),
    )
    ranks.log(
        "INFO",
        d.src("prefetch"),
        lambda r: (
            "Auto-prefetch is disabled because the filesystem (EXT4) is not a recognized network FS "
            "(NFS/Lustre). If you want to force prefetching, start vLLM with "
            "--safetensors-load-strategy=prefetch."
        ),
    )


def compile_lines(ranks: Ranks, cfg: SimConfig, d: Dialect, rest: float) -> None:
    """0.26's torch.compile lines between `Dynamo bytecode transform time` and the total."""
    rng = f"(1, {cfg.max_num_batched_tokens})"
    digest = hashlib.sha256(cfg.model.encode()).hexdigest()
    ranks.log(
        "INFO", d.src("compile_cached"), lambda r: f"Cache the graph of compile range {rng} for later use"
    )
    ranks.log(
        "INFO",
        d.src("compile_range"),
        lambda r: f"Compiling a graph for compile range {rng} takes {rest:.2f} s",
    )
    ranks.log(
        "INFO",
        d.src("aot_saved"),
        lambda r: (
            "saved AOT compiled function to /root/.cache/vllm/torch_compile_cache/torch_aot_compile/"
            f"{digest}/rank_{r}_0/model"
        ),
    )


def cutedsl(ranks: Ranks, d: Dialect) -> None:
    ranks.log(
        "INFO",
        d.src("cutedsl_gemm"),
        lambda r: "cuteDSL (CUTLASS Python) not available, ll_bf16_gemm disabled",
    )
    ranks.log(
        "INFO",
        d.src("cutedsl_warmup"),
        lambda r: "Skipping CuTeDSL warmup because no compile units were requested.",
    )


def memory_summary(ranks: Ranks, mem: MemoryPlan, util: float, d: Dialect) -> None:
    """`gpu_worker.py:857`: what was used, and the `--kv-cache-memory` that would reproduce it."""
    fit = max(0.0, mem.kv_gib - mem.graph_gib)
    full = fit + max(0.0, mem.free_gib - mem.requested_gib)
    text = (
        f"Free memory on device ({round(mem.free_gib, 2)}/{round(mem.total_gib, 2)} GiB) on startup. "
        f"Desired GPU memory utilization is ({util}, {round(mem.requested_gib, 2)} GiB). Actual usage is "
        f"{round(mem.weights_gib, 2)} GiB for weight, "
        f"{round(mem.activation_gib, 2)} GiB for peak activation, "
        f"{round(CONTEXT_GIB, 2)} GiB for non-torch memory, and {round(mem.graph_gib, 2)} GiB for CUDAGraph "
        f"memory. Replace gpu_memory_utilization config with `--kv-cache-memory={int(fit * GIB)}` "
        f"({round(fit, 2)} GiB) to fit into requested memory, or `--kv-cache-memory={int(full * GIB)}` "
        f"({round(full, 2)} GiB) to fully utilize gpu memory. Current kv cache memory in use is "
        f"{round(mem.kv_gib, 2)} GiB."
    )
    ranks.log("INFO", d.src("memory_summary"), lambda r: text)
    ranks.log(
        "INFO",
        d.src("jit_monitor"),
        lambda r: (
            "Kernel JIT monitor activated; monitored JIT compilations during inference will use mode=warn."
        ),
    )
