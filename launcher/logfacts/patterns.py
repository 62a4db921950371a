"""Every vLLM message the log parser reads, as a regex, with the version and file it comes from.

Patterns apply to the *message* part of a line (after the `(NAME pid=N) LEVEL MM-DD HH:MM:SS
[file.py:N] ` prefix, see `lines.py`), are anchored at the message start unless said otherwise, and
match on text, never on `file:line` (line numbers move between releases). Sources: vllm-facts.md §1–§5,
§11 (vLLM 0.33.0 wheel) and public issue logs for older releases ("older:" below).
"""

from __future__ import annotations

import re

# ---- version banner (vllm-facts.md §2 row 1, §11) ---------------------------------------------------------
# 0.33 `entrypoints/common/startup.py` with VLLM_DISABLE_LOG_LOGO=1.
VERSION_SERVER = re.compile(r"^vLLM server version (?P<version>\S+), serving model (?P<model>\S+)")
# older (≤ ≈0.13) `entrypoints/openai/api_server.py`.
VERSION_API = re.compile(r"^vLLM API server version (?P<version>\S+)")
# the default ASCII logo (≈0.11+): `█  version 0.33.0` and `█  model   Qwen/Qwen3-8B` (2–3 spaces).
LOGO_GLYPHS = "█▄▀"
VERSION_LOGO = re.compile(r"[█▄▀]\s+version\s+(?P<version>\d+\.\d+\S*)\s*$")
MODEL_LOGO = re.compile(r"[█▄▀]\s+model\s+(?P<model>\S+)\s*$")

# ---- arguments and config (vllm-facts.md §2 rows 2–4) -----------------------------------------------------
NON_DEFAULT_ARGS = re.compile(r"^non-default args: (?P<args>\{.*)$")  # 0.33 startup.py:96; ≥ ≈0.9
NAMESPACE_ARGS = re.compile(r"^args: (?P<args>Namespace\(.*)$")  # older api_server.py (≤ ≈0.8)
# 0.33 `v1/engine/core.py:139`; older V0 `Initializing an LLM engine (v0.6.4) with config:`; before
# 0.3.3 without the version (`Initializing an LLM engine with config: model='…'`, llm_engine.py:70).
ENGINE_CONFIG = re.compile(
    r"^Initializing an? (?:V\d )?LLM engine(?: \(v(?P<version>[^)]+)\))? with config: (?P<cfg>.*)$"
)
MAX_MODEL_LEN = re.compile(r"^Using max model len (?P<n>\d+)")  # config/model.py:2170
CHUNKED_PREFILL = re.compile(r"^Chunked prefill is enabled with max_num_batched_tokens=(?P<n>\d+)")
# not argparse's own `vllm serve: error: …` line, which also starts with the program's name
COMMAND_LINE = re.compile(
    r"(?:^|[\s'\"])(?:vllm serve|-m vllm\.entrypoints\.openai\.api_server)(?P<args>\s.*|$)"
)

# ---- model runner and loading (vllm-facts.md §2 rows 5–10) ------------------------------------------------
RUNNER_V2 = re.compile(r"^Using V2 Model Runner")  # v1/worker/gpu_worker.py:513
RUNNER_V1_FALLBACK = re.compile(r"^Model Runner V2 does not yet support")  # config/vllm.py:760
LOAD_START_V2 = re.compile(r"^Loading model from scratch")  # v1/worker/gpu/model_runner.py:399
# gpu_model_runner.py:4978 (0.7+)
LOAD_START_V1 = re.compile(r"^Starting to load model (?P<model>\S+?)\.\.\.")
WEIGHTS_TOOK = re.compile(r"^Loading weights took (?P<secs>[\d.]+) seconds")  # default_loader.py:506
# 0.33 `Model loading took 15.27 GiB memory and 14.8 seconds`; older `... took 19.5904 GB and 724.5 seconds`.
MODEL_LOADING = re.compile(
    r"^Model loading took (?P<gib>[\d.]+) ?(?:GiB|GB)(?: memory)? and (?P<secs>[\d.]+) seconds"
)
MODEL_WEIGHTS_OLD = re.compile(r"^Loading model weights took (?P<gib>[\d.]+) ?(?:GiB|GB)")  # V0 ≤ 0.7
COMPILE_START = re.compile(r"^(?:\[[^\]]+\] )?Starting torch\.compile")  # compilation/monitor.py:40
# monitor.py:62 (0.33); older `torch.compile takes 54.73 s in total`.
COMPILE_TOTAL = re.compile(
    r"^(?:\[[^\]]+\] )?torch\.compile (?:and initial profiling/warmup run together )?"
    r"t(?:ook|akes) (?P<secs>[\d.]+) s in total"
)
# §4: where the cache lives, and whether a graph was compiled into it (a miss) or loaded from it (a hit);
# 0.26.0 `compile range (1, 8192)`, older `dynamic shape` / `general shape`.
COMPILE_CACHE_DIR = re.compile(
    r"^(?:\[[^\]]+\] )?Using cache directory: (?P<dir>.+?) for vLLM's torch\.compile"
)
COMPILE_MISS = re.compile(
    r"^(?:\[[^\]]+\] )?Compiling a graph for (?:compile range|dynamic shape|general shape)"
)
COMPILE_HIT = re.compile(r"^(?:\[[^\]]+\] )?Directly load the compiled graph\(s\) for ")

# ---- memory, KV cache, CUDA graphs (vllm-facts.md §2 rows 12–20, §3) --------------------------------------
CG_PROFILE_V1 = re.compile(r"^Profiling CUDA graph memory: (?P<modes>.*)$")  # gpu_model_runner.py:6304
CG_PROFILE_MODE = re.compile(r"(?P<mode>[A-Z_]+)=(?P<n>\d+) \(largest=(?P<largest>\d+)\)")
MEMORY_PROFILING_OLD = re.compile(r"^Memory profiling (?:takes|results)")  # V0 worker.py (≤ 0.8)
# V0 worker.py's profile summary (≈0.6.5-0.10, also V1 gpu_worker.py in 0.8), one message of three
# lines: `Memory profiling takes …\nthe current vLLM instance can use total_gpu_memory (79.11GiB) x
# gpu_memory_utilization (0.90) = …\nmodel weights take 14.99GiB; …; the rest of the memory reserved
# for KV Cache is 54.62GiB.` (each line prefixed, or only the first one).
MEMORY_BUDGET_OLD = re.compile(
    r"^the current vLLM instance can use total_gpu_memory \([\d.]+ ?GiB\) x gpu_memory_utilization "
    r"\((?P<util>[\d.]+)\)"
)
MEMORY_WEIGHTS_OLD = re.compile(r"^model weights take (?P<gib>[\d.]+) ?GiB;")
MEMORY_KV_OLD = re.compile(r"the rest of the memory reserved for KV Cache is (?P<gib>-?[\d.]+) ?GiB")
KV_AVAILABLE = re.compile(r"^Available KV cache memory: (?P<gib>-?[\d.]+) ?GiB")  # gpu_worker.py:772
# 0.33 one line (kv_cache_utils.py:1147); thousands separators or none (forks, very old builds).
KV_ONE_LINE = re.compile(
    r"^(?P<dev>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens, "
    r"Maximum concurrency for (?P<maxlen>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
)
# older (≈0.7.3 to ≈0.26): two lines, `GPU KV cache size: N tokens` then the concurrency line.
KV_SIZE_ONLY = re.compile(r"^(?P<dev>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens\s*$")
KV_CONCURRENCY = re.compile(
    r"^Maximum concurrency for (?P<maxlen>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
)
# older (V0, early V1): `# GPU blocks: N`; 0.7-0.8 executor_base.py names the device: `# CUDA blocks: N`,
# `# cuda blocks: N` (the platform's device name), followed on the same line by `# CPU blocks: M`
GPU_BLOCKS = re.compile(r"^# (?:GPU|CUDA|cuda|XPU|xpu|NPU|npu|HPU|hpu) blocks: (?P<blocks>\d+)")
GRAPH_DONE = re.compile(  # 0.33 model_runner.py:1163 / gpu_model_runner.py:6516; V0 `... in 5 secs.`
    r"^Graph capturing finished in (?P<secs>\d+) secs?(?:, took (?P<gib>-?[\d.]+) GiB)?"
)
CAPTURE_SKIPPED = re.compile(r"^Skipping (?:encoder and decoder )?CUDA graph capture")  # cudagraph_mode NONE
# V0 worker/model_runner.py: `Capturing the model for CUDA graphs.` (0.6.0-0.6.3), `Capturing cudagraphs
# for decoding.` (0.6.4-0.10.2): graphs are being captured, so the engine is not eager.
CAPTURE_START_V0 = re.compile(r"^Capturing (?:the model for CUDA graphs|cudagraphs for decoding)\.")
INIT_ENGINE = re.compile(  # v1/engine/core.py:405; older `... took 25.99 seconds`.
    r"^init engine \(profile, create kv cache, warmup model\) took (?P<secs>[\d.]+) s(?:econds)?"
    r"(?:.*?\(compilation: (?P<comp>[\d.]+) s\))?"
)
ENFORCE_EAGER = re.compile(r"^(?:Enforce eager set|Cudagraph is disabled under eager mode)")  # vllm.py:1778

# ---- tqdm bars (stderr, no prefix in 0.33; vllm-facts.md §3.3) -----------------------------------------
# Searched anywhere in a `\r` segment: a bar may be glued to a log line written while it was active.
# `Capturing CUDA graphs (PIECEWISE):  37%|███▋      | 19/51 [00:01<...]`, V1 `(decode, FULL)`,
# V0 `Capturing CUDA graph shapes`, and vLLM's shard bar `...checkpoint shards: 100% Completed | 5/5 [`.
BAR = re.compile(
    r"(?P<desc>Capturing [^:|\r\n\]]*?|Loading [^:|\r\n\]]*?checkpoint shards)\s*:\s+(?P<pct>\d+)%"
    r"(?:\s*\|[^|\r\n]*\||\s+Completed\s*\|)\s*(?P<n>\d+)/(?P<total>\d+)"
)

# ---- serving (vllm-facts.md §2 rows 23–25, §11) -----------------------------------------------------------
SERVER_START = re.compile(r"^Starting vLLM (?:API )?server(?: \d+)? on (?P<url>\S+)")
UVICORN_RUNNING = re.compile(r"^Uvicorn running on (?P<url>\S+)")  # older uvicorn without a bound socket
READY = re.compile(r"^Application startup complete\b")  # uvicorn, after the engine is up
SHUTDOWN = re.compile(
    r"^(?:\[shutdown\] API server: shutdown triggered|Shutting down\b|Application shutdown complete)"
)
URL_PORT = re.compile(r":(?P<port>\d{1,5})(?:/|$|\)|\s)")
SOCKET_PORT = re.compile(r"\('[^']*', (?P<port>\d{1,5})\)")

# ---- engine config line fields (vllm-facts.md §3.1) --------------
CFG_MODEL = re.compile(r"""^model=(?:'(?P<model>[^']*)'|"(?P<dq>[^"]*)"|(?P<bare>[^,\s]+))""")
CFG_INT = {
    "tensor_parallel_size": re.compile(r"\btensor_parallel_size=(?P<v>\d+)"),
    "pipeline_parallel_size": re.compile(r"\bpipeline_parallel_size=(?P<v>\d+)"),
    "data_parallel_size": re.compile(r"\bdata_parallel_size=(?P<v>\d+)"),
    "max_model_len": re.compile(r"\bmax_seq_len=(?P<v>\d+)"),
}
CFG_EAGER = re.compile(r"\benforce_eager=(?P<v>True|False)")
CFG_WORD = {
    "kv_cache_dtype": re.compile(r"\bkv_cache_dtype=(?P<v>[^,\s]+)"),
    "quantization": re.compile(r"\bquantization=(?P<v>[^,\s]+)"),
    "served_model_name": re.compile(r"\bserved_model_name=(?P<v>[^,\s]+)"),
}
# 0.33 repr `'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>`; JSON-ish ≈0.10–0.11
# `"cudagraph_mode":[2,1]` (enum values) or a quoted name.
CFG_CG_MODE = re.compile(
    r"""["']cudagraph_mode["']\s*:\s*(?:<CUDAGraphMode\.(?P<name>\w+)|["'](?P<quoted>\w+)["']"""
    r"""|(?P<tuple>\[\s*\d+\s*,\s*\d+\s*\]|\(\s*\d+\s*,\s*\d+\s*\)|\d+)|(?P<none>None|null))"""
)
# CUDAGraphMode values (config/compilation.py): NONE=0, PIECEWISE=1, FULL=2, (FULL, NONE), (FULL, PIECEWISE).
CG_MODE_VALUES = {
    "0": "NONE",
    "1": "PIECEWISE",
    "2": "FULL",
    "2,0": "FULL_DECODE_ONLY",
    "2,1": "FULL_AND_PIECEWISE",
}
CFG_SIZES = re.compile(r"""["']cudagraph_capture_sizes["']\s*:\s*\[(?P<sizes>[\d,\s]*)\]""")
CFG_MAX_SIZE = re.compile(r"""["'](?:max_cudagraph_capture_size|max_capture_size)["']\s*:\s*(?P<n>\d+)""")
CFG_SPECULATIVE = re.compile(r"\bspeculative_config=")

# ---- runtime death after readiness (vllm-facts.md §5.4) -----------------------------
ENGINE_DIED = re.compile(
    r"EngineCore encountered a fatal error|engine core exited unexpectedly|EngineDeadError"
    r"|Worker proc \S+ died unexpectedly|Engine core process \S+ died unexpectedly"
)

# vLLM's KV-capacity errors state the model's max length: `The model's max seq len (8192) is larger
# than …` (V0 worker.py), `To serve at least one request with the model's max seq len (131072), …` (V1).
KV_ERROR_MAX_LEN = re.compile(r"models?'s max seq len \((?P<n>\d+)\)")

# Ray appends this to de-duplicated worker lines: `... [repeated 7x across cluster]`.
RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")


def to_int(text: str) -> int:
    """`789,184` or `789184` → 789184 (vLLM prints thousands separators since ≈0.7.3)."""
    return int(text.replace(",", "").replace("_", ""))


def port_of(url: str) -> int | None:
    m = URL_PORT.search(url) or SOCKET_PORT.search(url)
    return int(m.group("port")) if m else None
