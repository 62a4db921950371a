"""What differs between the vLLM versions the simulator speaks, in one table (FACTS.md §11).

`0.33` is vLLM 0.33.0 as FACTS.md describes it. `0.26` speaks the *older* column of FACTS §11
(two KV lines, the V1 runner's capture bars, `EngineCore_DP0`, prefixed stdout/stderr,
`reasoning_content`, pre-rename metric names); it is the older dialect, not a byte-exact 0.26.0.
Every `file.py:N` source is cosmetic: parsers must match on message text (FACTS §0).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Dialect:
    """One vLLM version's observable differences."""

    version: str
    engine_name: str  # log name and title of the engine core process
    prefix_streams: bool  # older vLLM prefixed uvicorn/tqdm/traceback lines too (`_add_prefix`)
    runner: str  # "V2" | "V1"
    kv_one_line: bool
    reasoning_field: str
    default_util: float
    metric_kv_usage: str
    metric_prefix_queries: str
    metric_prefix_hits: str
    metric_itl: str
    sources: dict[str, str] = field(default_factory=dict)

    def src(self, event: str) -> str:
        return self.sources[event]

    def version_line(self, model: str) -> str:
        if self.version.startswith("0.33"):
            return f"vLLM server version {self.version}, serving model {model}"
        return f"vLLM API server version {self.version}"

    def server_start_line(self, url: str) -> str:
        if self.version.startswith("0.33"):
            return f"Starting vLLM server on {url}"
        return f"Starting vLLM API server 0 on {url}"


_COMMON_SOURCES = {
    "version": "startup.py:38",
    "args": "startup.py:96",
    "arch": "model.py:744",
    "max_len": "model.py:2170",
    "chunked": "scheduler.py:310",
    "unknown_env": "interface.py:1469",
    "eager_note": "vllm.py:1778",
    "eager_off": "vllm.py:1790",
    "sizes_overridden": "compilation.py:1102",
    "cg_mode_override": "vllm.py:1500",
    "runner_fallback": "vllm.py:760",
    "engine_config": "core.py:139",
    "v2_runner": "gpu_worker.py:513",
    "attn": "cuda.py:508",
    "weights": "default_loader.py:506",
    "compile_start": "monitor.py:40",
    "compile_cache": "backends.py:1125",
    "dynamo": "backends.py:1187",
    "compile_range": "backends.py:417",
    "compile_total": "monitor.py:62",
    "kv_avail": "gpu_worker.py:772",
    "cg_note": "gpu_worker.py:787",
    "kv_size": "kv_cache_utils.py:1147",
    "kv_conc": "kv_cache_utils.py:1151",
    "jit_start": "kernel_warmup.py:179",
    "jit_done": "kernel_warmup.py:192",
    "cg_pool": "gpu_worker.py:1003",
    "init_done": "core.py:405",
    "failed_start": "core.py:1584",
    "fatal": "core.py:1586",
    "worker_failed": "multiproc_executor.py:1057",
    "worker_parent_exit": "multiproc_executor.py:803",
    "tasks": "entry.py:135",
    "auto_tools": "parser_manager.py:36",
    "server_start": "entry.py:139",
    "routes": "launcher.py:188",
    "route": "launcher.py:197",
    "stats": "loggers.py:335",
    "spec_stats": "metrics.py:120",
    "sd_api_trigger": "launcher.py:256",
    "sd_api_mode": "launcher.py:272",
    "sd_api_stopped": "launcher.py:281",
    "sd_api_http": "launcher.py:285",
    "sd_core_signal": "core.py:1525",
    "sd_core_start": "core.py:1712",
    "sd_core_inflight": "core.py:1720",
    "sd_core_done": "core.py:1741",
    "core_exited": "core_client.py:839",
    "output_handler": "async_llm.py:943",
    "marker": "custom_ops.py:88",
}

V033 = Dialect(
    version="0.33.0",
    engine_name="EngineCore",
    prefix_streams=False,
    runner="V2",
    kv_one_line=True,
    reasoning_field="reasoning",
    default_util=0.92,
    metric_kv_usage="vllm:kv_cache_usage_perc",
    metric_prefix_queries="vllm:prefix_cache_queries",
    metric_prefix_hits="vllm:prefix_cache_hits",
    metric_itl="vllm:inter_token_latency_seconds",
    sources={
        **_COMMON_SOURCES,
        "load_start": "model_runner.py:399",
        "model_loaded": "model_runner.py:428",
        "cg_done": "model_runner.py:1163",
        "cg_skip": "model_runner.py:930",
    },
)

V026 = Dialect(
    version="0.26.0",
    engine_name="EngineCore_DP0",
    prefix_streams=True,
    runner="V1",
    kv_one_line=False,
    reasoning_field="reasoning_content",
    default_util=0.9,
    metric_kv_usage="vllm:gpu_cache_usage_perc",
    metric_prefix_queries="vllm:gpu_prefix_cache_queries",
    metric_prefix_hits="vllm:gpu_prefix_cache_hits",
    metric_itl="vllm:time_per_output_token_seconds",
    sources={
        **_COMMON_SOURCES,
        "kv_avail": "gpu_worker.py:255",
        "kv_size": "kv_cache_utils.py:833",
        "kv_conc": "kv_cache_utils.py:837",
        "init_done": "core.py:193",
        "server_start": "api_server.py:1885",
        "version": "api_server.py:1805",
        "args": "api_server.py:1806",
        "load_start": "gpu_model_runner.py:4978",
        "model_loaded": "gpu_model_runner.py:5088",
        "cg_profile": "gpu_model_runner.py:6304",
        "cg_estimate": "gpu_model_runner.py:6409",
        "cg_done": "gpu_model_runner.py:6516",
        "cg_skip": "gpu_model_runner.py:6480",
    },
)

DIALECTS: dict[str, Dialect] = {"0.33": V033, "0.26": V026}


def dialect_for(version: str) -> Dialect:
    return DIALECTS[version]
