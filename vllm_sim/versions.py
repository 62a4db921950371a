"""What differs between the vLLM versions the simulator speaks, in one table.

`0.33` is vLLM 0.33.0 as docs/vllm-facts.md describes it. `0.26` is vLLM 0.26.0 as two real runs on an H200
logged it (`tests/data/real-vllm-0.26/`, compared line by line with `scripts/real-vllm/fidelity.py`)
and as its wheel's source reads (`scripts/real-vllm/README.md`): the V2 runner by default, V1 for
ngram drafting; stdout/stderr prefixed by `_add_prefix` (uvicorn, tqdm); two KV lines; no
`Starting torch.compile` and no JIT warm-up; one capture pass. Where vllm-facts.md §11's "older" column
disagrees with that run (EngineCore_DP0, `vLLM API server version`, old metric names), the run wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm_flags.cudagraph_sizes import spec_runner
from vllm_sim.vllm_sources import SOURCES_026, SOURCES_033


@dataclass(frozen=True, slots=True)
class Dialect:
    """One vLLM version's observable differences."""

    version: str
    engine_name: str  # log name and title of the engine core process
    prefix_streams: bool  # `_add_prefix`: uvicorn/tqdm/traceback lines prefixed too
    runner: str  # the default model runner, "V2" | "V1"
    kv_one_line: bool
    reasoning_field: str
    default_util: float
    metric_kv_usage: str
    metric_prefix_queries: str
    metric_prefix_hits: str
    metric_itl: str
    sources: dict[str, str] = field(default_factory=dict)
    v2_spec_only: bool = False  # V2 runs only the drafting methods it supports, others fall back to V1
    logo_block: bool = False  # the whole logo as one multi-line record, not its version line only
    compile_tag: str = "[backbone] "
    compile_start_line: bool = True  # `Starting torch.compile`
    jit_warmup: bool = True  # `JIT kernel warmup starting.` / `... finished in`
    v2_profile_capture: bool = True  # V2 captures once before the KV cache to measure graph memory
    notes: bool = False  # 0.26's informational lines (parallel state, FA version, cuteDSL, ...)
    mpclient_shutdown: bool = False  # `[shutdown] MPClient: ...` lines and the process-manager kill
    uvicorn_finished: bool = True  # uvicorn's `Finished server process [N]`
    shard_bar_lines: bool = False  # each shard-bar redraw on a line of its own, then an empty one
    request_id_hex: int = 32  # hex digits after `chatcmpl-`
    chunk_extras: bool = False  # chat chunks: prompt_token_ids/prompt_text, token_ids, system_fingerprint
    engine_follows_api_server: bool = True  # the engine exits when the API server dies (SIGKILL)
    gib_rounded: bool = False  # GiB in messages by `format_gib` = round(x, 2) (139.8), not "%.2f" (139.80)
    no_failed_procs: bool = False  # `Failed core proc(s): {}` when the engine's start failed
    # 0.26.0's traceback frames (vllm_sim/tracebacks.py `_026`), the engine's second traceback
    # under `Process EngineCore:`, and the parsers checked after the banner and args (setup_server)
    real_frames: bool = False
    created_families: bool = False  # /metrics: `x_total` counter and `x_created` gauge families
    sleep_replies: bool = False  # /sleep and /wake_up answer JSON (0.33), not an empty 200 (0.26.0)

    def src(self, event: str, runner: str | None = None) -> str:
        if runner is not None and f"{event}@{runner}" in self.sources:
            return self.sources[f"{event}@{runner}"]
        return self.sources[event]

    def runner_for(self, spec_method: str | None) -> str:
        """0.26.0's V2 takes eagle, eagle3, mtp, dflash and dspark only (`vllm_flags/cudagraph_sizes.py`)."""
        if self.v2_spec_only and spec_runner(spec_method) == "V1":
            return "V1"
        return self.runner

    def version_line(self, model: str) -> str:
        return f"vLLM server version {self.version}, serving model {model}"

    def server_start_line(self, url: str) -> str:
        return f"Starting vLLM server on {url}"

    def gib(self, value: float) -> str:
        """GiB as vLLM prints them in memory messages: 0.26's `format_gib` is `round(x, 2)` (139.8),
        0.33's messages use two decimals (139.80)."""
        return str(round(value, 2)) if self.gib_rounded else f"{value:.2f}"

    def failed_procs(self) -> str:
        """`Failed core proc(s): ...` of `wait_for_engine_startup`: 0.26.0 printed `{}` (the engine
        not yet seen as finished) in the recorded free-memory failure."""
        return "{}" if self.no_failed_procs else f"{{'{self.engine_name}': 1}}"

    def model_loaded_line(self, runner: str, gib: float, secs: float) -> str:
        if not self.gib_rounded:
            return f"Model loading took {gib:.2f} GiB memory and {secs:.6f} seconds"
        # 0.26 prints `format_gib` (a rounded float); only its V1 runner says "memory".
        word = " memory" if runner == "V1" else ""
        return f"Model loading took {self.gib(gib)} GiB{word} and {secs:.6f} seconds"


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
    sources=SOURCES_033,
    sleep_replies=True,
)

V026 = Dialect(
    version="0.26.0",
    engine_name="EngineCore",
    prefix_streams=True,
    runner="V2",
    kv_one_line=False,
    # Not observed (no reasoning parser in the recorded runs): 0.26 already names its engine
    # `EngineCore` (PR #36822, ≈ March 2026), so it postdates the removal of `reasoning_content`
    # from responses (PR #33402, Jan 2026, vllm-facts.md §7).
    reasoning_field="reasoning",
    default_util=0.9,  # vllm-facts.md §11 "older"; unverified for 0.26 (the runs set 0.2)
    # Observed: the real 0.26.0 /metrics (tests/data/bench/vllm-0.26.0-metrics-*.txt) uses the new names.
    metric_kv_usage="vllm:kv_cache_usage_perc",
    metric_prefix_queries="vllm:prefix_cache_queries",
    metric_prefix_hits="vllm:prefix_cache_hits",
    metric_itl="vllm:inter_token_latency_seconds",
    sources=SOURCES_026,
    v2_spec_only=True,
    logo_block=True,
    compile_tag="",
    compile_start_line=False,
    jit_warmup=False,
    v2_profile_capture=False,
    notes=True,
    mpclient_shutdown=True,
    uvicorn_finished=False,
    shard_bar_lines=True,
    request_id_hex=16,
    chunk_extras=True,
    # Observed on the H200: SIGKILL of the API server left EngineCore running with its 29 GB, parent
    # pid 1, until SIGTERM (docs/real-vllm.md step 4); 0.26 has no parent-death watch for it.
    engine_follows_api_server=False,
    gib_rounded=True,
    no_failed_procs=True,  # observed in free-memory.log
    real_frames=True,
    created_families=True,  # record/eager/metrics-after.txt
)

DIALECTS: dict[str, Dialect] = {"0.33": V033, "0.26": V026}


def dialect_for(version: str) -> Dialect:
    return DIALECTS[version]
