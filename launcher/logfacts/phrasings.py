"""The phrasings the log parser knows, as vLLM's own source writes them (input of `catalogue.build`).

Each entry: the kind of failure (or the fact) it proves, a `phrase` that sits on one source line of
vLLM (or of the library that raises it: `origin`), the exception class when it is raised rather than
logged, and an `example` message written from the format string with illustrative values. The
catalogue builder finds, per release, where the phrase is printed; the tests turn each example into
lines in each release's log format and check the parser reads them. Add a phrasing here, then rebuild
the catalogue (`python -m launcher.logfacts.catalogue SRC_DIR`): a test fails until the JSON has it.
"""

from __future__ import annotations

from typing import Any

# Data, not code: one entry a line would be unreadable, so this module keeps its own layout.
# ruff: noqa: E501
# fmt: off

V, TORCH, HF, ARGPARSE, PY, CUDA = "vllm", "torch", "huggingface_hub", "argparse", "python", "cuda"

FAILURES: list[dict[str, Any]] = [
    # ---- free_memory -----------------------------------------------------------------------------
    {"kind": "free_memory", "origin": V, "exception": "ValueError",
     "phrase": "is less than desired GPU memory utilization",
     "example": "Free memory on device (3.22/79.19 GiB) on startup is less than desired GPU memory "
                "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
                "other processes."},
    {"kind": "free_memory", "origin": V, "exception": "ValueError",
     "phrase": "Free memory on device {init_snapshot.device_} ",
     "example": "Free memory on device cuda:0 (3.22/79.19 GiB) on startup is less than desired GPU memory "
                "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
                "other processes."},
    {"kind": "free_memory", "origin": V, "exception": "ValueError",
     "phrase": "is less than the engine's budget after excluding",
     "example": "Free memory on device cuda:0 (3.22/79.19 GiB) on startup is less than the engine's budget "
                "after excluding external process's weights (60.00 GiB)."},
    {"kind": "free_memory", "origin": V, "exception": "AssertionError",
     "phrase": "\"Error in memory profiling. \"",
     "example": "Error in memory profiling. Initial free memory 70.10 GiB, current free memory 71.30 GiB. "
                "This happens when other processes sharing the same container release GPU memory while vLLM "
                "is profiling during initialization."},
    # ---- kv_cache_too_small ----------------------------------------------------------------------
    {"kind": "kv_cache_too_small", "origin": V, "exception": "ValueError",
     "phrase": "No available memory for the cache blocks",
     "example": "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine."},
    {"kind": "kv_cache_too_small", "origin": V, "exception": "ValueError",
     "phrase": "The model's max seq len ({max_model_len}) ",
     "example": "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
                "stored in KV cache (20416). Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine."},
    {"kind": "kv_cache_too_small", "origin": V, "exception": "ValueError",
     "phrase": "To serve at least one request with the models's max seq len",
     "example": "To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache "
                "is needed, which is larger than the available KV cache memory (9.31 GiB). Based on the "
                "available memory, the estimated maximum model length is 76208. Try increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."},
    {"kind": "kv_cache_too_small", "origin": V, "exception": "ValueError",
     "phrase": "To serve at least one request with the model's max seq len",
     "example": "To serve at least one request with the model's max seq len (131072), (16.00 GiB KV cache "
                "is needed, which is larger than the available KV cache memory (9.31 GiB). Based on the "
                "available memory, the estimated maximum model length is 76208. Try increasing "
                "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."},
    # ---- oom (loading, profiling, capture) ---------------------------------------------------------
    {"kind": "oom", "origin": TORCH, "exception": "torch.OutOfMemoryError",
     "phrase": "CUDA out of memory",
     "example": "CUDA out of memory. Tried to allocate 1.02 GiB. GPU 3 has a total capacity of 79.19 GiB of "
                "which 612.00 MiB is free. Including non-PyTorch memory, this process has 78.58 GiB memory "
                "in use."},
    {"kind": "oom", "origin": V, "exception": "ValueError",
     "phrase": "Failed to load model - not enough GPU memory",
     "example": "Failed to load model - not enough GPU memory. Tried to allocate 1.02 GiB. GPU 0 has a total "
                "capacity of 79.19 GiB of which 612.00 MiB is free."},
    {"kind": "oom", "origin": V, "exception": "RuntimeError",
     "phrase": "CUDA out of memory occurred when warming up sampler with",
     "example": "CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try "
                "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."},
    {"kind": "oom", "origin": TORCH, "exception": "RuntimeError",
     "phrase": "CUDA error: out of memory",
     "example": "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some "
                "other API call, so the stacktrace below might be incorrect."},
    # ---- tool_parser ----------------------------------------------------------------------------------
    {"kind": "tool_parser", "origin": V, "exception": "KeyError",
     "phrase": "invalid tool call parser: {args.tool_call_parser} ",
     "example": "'invalid tool call parser: hermes2 (chose from { deepseek_v3,granite,hermes,"
                "llama3_json,mistral,pythonic })'"},
    {"kind": "tool_parser", "origin": V, "exception": "TypeError",
     "phrase": "Error: --enable-auto-tool-choice requires",
     "example": "Error: --enable-auto-tool-choice requires --tool-call-parser"},
    {"kind": "tool_parser", "origin": ARGPARSE, "exception": None, "argparse": True,
     "phrase": "--tool-call-parser",
     "example": "argument --tool-call-parser: invalid choice: 'hermes2' (choose from 'hermes', 'mistral', "
                "'llama3_json')"},
    {"kind": "tool_parser", "origin": V, "exception": "TypeError",
     "phrase": "cannot be used with the tokenizer of",
     "example": "--enable-auto-tool-choice and --tool-call-parser mistral cannot be used with the tokenizer "
                "of Qwen/Qwen3-8B"},
    # ---- reasoning_parser -------------------------------------------------------------------------
    {"kind": "reasoning_parser", "origin": V, "exception": "KeyError",
     "phrase": "invalid reasoning parser: ",
     "example": "'invalid reasoning parser: qwen4 (chose from { deepseek_r1,granite,qwen3 })'"},
    {"kind": "reasoning_parser", "origin": V, "exception": "KeyError",
     "phrase": "Reasoning parser '{name}' not found. Available parsers: ",
     "example": "\"Reasoning parser 'qwen4' not found. Available parsers: deepseek_r1, granite, qwen3\""},
    {"kind": "tool_parser", "origin": V, "exception": "KeyError",
     "phrase": "Tool parser '{name}' not found.",
     "example": "\"Tool parser 'hermes2' not found.\""},
    {"kind": "reasoning_parser", "origin": ARGPARSE, "exception": None, "argparse": True,
     "phrase": "\"--reasoning-parser\",",
     "example": "argument --reasoning-parser: invalid choice: 'qwen4' (choose from 'deepseek_r1', "
                "'granite')"},
    {"kind": "reasoning_parser", "origin": V, "exception": "TypeError",
     "phrase": "Error: --enable-reasoning requires",
     "example": "Error: --enable-reasoning requires --reasoning-parser"},
    {"kind": "reasoning_parser", "origin": V, "exception": "TypeError",
     "phrase": "{reasoning_parser_name=} has not been registered",
     "example": "reasoning_parser_name='qwen4' has not been registered"},
    # ---- port_in_use -----------------------------------------------------------------------------
    {"kind": "port_in_use", "origin": PY, "exception": "OSError", "site_phrase": "sock.bind(addr)",
     "phrase": "[Errno 98] Address already in use",
     "example": "[Errno 98] Address already in use"},
    # ---- distributed / NCCL ----------------------------------------------------------------------
    {"kind": "distributed", "origin": V, "exception": "RuntimeError",
     "phrase": "NCCL error: {error_str}",
     "example": "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"},
    {"kind": "distributed", "origin": TORCH, "exception": "torch.distributed.DistNetworkError",
     "phrase": "DistNetworkError",
     "example": "The server socket has failed to listen on any local network address. port: 29500, "
                "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"},
    # ---- model not found / gated / offline ---------------------------------------------------------
    {"kind": "model_not_found", "origin": V, "exception": "ValueError",
     "phrase": "Invalid repository ID or local directory specified",
     "example": "Invalid repository ID or local directory specified: 'Qwen/Qwen9-8B'.\nPlease verify the "
                "following requirements:\n1. Provide a valid Hugging Face repository ID."},
    {"kind": "model_not_found", "origin": V, "exception": "RuntimeError",
     "phrase": "Cannot find any model weights with",
     "example": "Cannot find any model weights with `/models/qwen3-8b`"},
    {"kind": "model_not_found", "origin": HF, "exception": "huggingface_hub.errors.GatedRepoError",
     "phrase": "Cannot access gated repo",
     "example": "401 Client Error. (Request ID: Root=1-6750)\n\nCannot access gated repo for url "
                "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json."},
    {"kind": "model_not_found", "origin": HF, "exception": "huggingface_hub.errors.RepositoryNotFoundError",
     "phrase": "Repository Not Found for url",
     "example": "404 Client Error. (Request ID: Root=1-6751)\n\nRepository Not Found for url: "
                "https://huggingface.co/api/models/Qwen/Qwen9-8B/revision/main."},
    {"kind": "model_not_found", "origin": HF, "exception": "huggingface_hub.errors.LocalEntryNotFoundError",
     "phrase": "LocalEntryNotFoundError",
     "example": "Cannot find an appropriate cached snapshot folder for the specified revision on the local "
                "disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, "
                "pass 'local_files_only=False' as input."},
    {"kind": "model_not_found", "origin": "transformers", "exception": "OSError",
     "phrase": "You are trying to access a gated repo.",
     "example": "You are trying to access a gated repo.\nMake sure to have access to it at "
                "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct."},
    {"kind": "model_not_found", "origin": HF, "exception": "huggingface_hub.errors.HFValidationError",
     "phrase": "HFValidationError",
     "example": "Repo id must use alphanumeric chars or '-', '_', '.', '--' and '..' are forbidden, '-' and "
                "'.' cannot start or end the name, max length is 96: '/models//qwen'."},
    # ---- dtype / quantization unsupported on this GPU -------------------------------------------------
    {"kind": "gpu_capability", "origin": V, "exception": "ValueError",
     "phrase": "Bfloat16 is only supported on GPUs with compute capability ",
     "example": "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
                "V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly "
                "setting the `dtype` flag in CLI, for example: --dtype=half."},
    {"kind": "gpu_capability", "origin": V, "exception": "ValueError",
     "phrase": "\"is not supported for the current GPU. Minimum \"",
     "example": "The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. "
                "Current capability: 70."},
    {"kind": "gpu_capability", "origin": CUDA, "exception": "RuntimeError",
     "phrase": "no kernel image is available for execution on the device",
     "example": "CUDA error: no kernel image is available for execution on the device"},
    {"kind": "gpu_capability", "origin": "flash_attn", "exception": "RuntimeError",
     "phrase": "FlashAttention only supports Ampere GPUs or newer",
     "example": "FlashAttention only supports Ampere GPUs or newer."},
    # ---- config validation (pydantic) ---------------------------------------------------------------
    {"kind": "config", "origin": V, "exception": None, "pydantic": True,
     "phrase": "than the derived max_model_len (",
     "example": "User-specified max_model_len (65536) is greater than the derived max_model_len "
                "(max_position_embeddings=40960 in model's config.json). To allow overriding this maximum, "
                "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."},
    {"kind": "config", "origin": V, "exception": "ValueError",
     "phrase": "\" must be divisible by tensor parallel size \"",
     "example": "Total number of attention heads (28) must be divisible by tensor parallel size (8)."},
    {"kind": "config", "origin": V, "exception": "ValueError",
     "phrase": "f\"max_num_batched_tokens ({self.max_num_batched_tokens}) is \"",
     "example": "max_num_batched_tokens (2048) is smaller than max_model_len (32768). This effectively "
                "limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer "
                "sequences. Please increase max_num_batched_tokens or decrease max_model_len."},
    # ---- chat template / tokenizer -------------------------------------------------------------------
    {"kind": "chat_template", "origin": V, "exception": "ValueError",
     "phrase": "looks like a file path, but it failed to be opened",
     "example": "The supplied chat template (/templates/tool_chat.jinja) looks like a file path, but it "
                "failed to be opened. Tried: /templates/tool_chat.jinja and "
                "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/chat_templates/"
                "/templates/tool_chat.jinja. Reason: [Errno 2] No such file or directory"},
    {"kind": "chat_template", "origin": V, "exception": "RuntimeError",
     "phrase": "Failed to load the tokenizer. If the tokenizer ",
     "example": "Failed to load the tokenizer. If the tokenizer is a custom tokenizer not yet available in "
                "the HuggingFace transformers library, consider setting `trust_remote_code=True` in LLM or "
                "using the `--trust-remote-code` flag in the CLI."},
    # ---- argument: the command line refused -----------------------------------------------------------
    {"kind": "argument", "origin": ARGPARSE, "exception": None, "argparse": True,
     "site_phrase": "vllm serve [model_tag] [options]", "phrase": "usage: vllm serve [model_tag] [options]",
     "example": "argument --dtype: invalid choice: 'torch.bfloat16' (choose from 'auto', 'bfloat16', 'float16')"},
    {"kind": "argument", "origin": ARGPARSE, "exception": None, "argparse": True,
     "site_phrase": "vllm serve [model_tag] [options]", "phrase": "unrecognized arguments: ",
     "example": "unrecognized arguments: --omni"},
    {"kind": "argument", "origin": V, "exception": "ValueError",
     "phrase": "positional argument or in a config file instead of via ",
     "example": "With `vllm serve`, you should provide the model as a positional argument or in a config file "
                "instead of via the `--model` option."},
    {"kind": "argument", "origin": V, "exception": "ValueError",
     "phrase": "No model specified! Please specify model either ",
     "example": "No model specified! Please specify model either as a positional argument or in a config file."},
    # ---- compile / cuda_graph: torch.compile or the capture itself failed -------------------------------
    {"kind": "compile", "origin": TORCH, "exception": "torch._dynamo.exc.BackendCompilerFailed",
     "phrase": "BackendCompilerFailed",
     "example": "backend='inductor' raised:\nTypeError: 'int' object is not iterable"},
    {"kind": "compile", "origin": TORCH, "exception": "torch._inductor.exc.InductorError",
     "phrase": "InductorError",
     "example": "RuntimeError: Triton Error [CUDA]: device kernel image is invalid"},
    {"kind": "cuda_graph", "origin": CUDA, "exception": "RuntimeError",
     "phrase": "operation not permitted when stream is capturing",
     "example": "CUDA error: operation not permitted when stream is capturing"},
    # ---- engine_init (the generic line; the cause is the first exception before it) --------------------
    {"kind": "engine_init", "origin": V, "exception": "RuntimeError",
     "phrase": "Engine core initialization failed. ",
     "example": "Engine core initialization failed. See root cause above. Failed core proc(s): {}"},
    {"kind": "engine_init", "origin": V, "exception": "RuntimeError",
     "phrase": "\"Engine process failed to start. See stack \"",
     "example": "Engine process failed to start. See stack trace for the root cause."},
    {"kind": "engine_init", "origin": V, "exception": None, "logged": True,
     "phrase": "EngineCore failed to start.",
     "example": "EngineCore failed to start."},
]

FACTS: list[dict[str, Any]] = [
    {"fact": {"enforce_eager": True}, "origin": V, "phrase": "Cudagraph is disabled under eager mode",
     "example": "Cudagraph is disabled under eager mode"},
    {"fact": {"enforce_eager": True}, "origin": V, "phrase": "Enforce eager set, disabling torch.compile",
     "example": "Enforce eager set, disabling torch.compile and CUDAGraphs. This is equivalent to setting "
                "-cc.mode=none -cc.cudagraph_mode=none"},
    {"fact": {"enforce_eager": False}, "origin": V, "phrase": "Capturing the model for CUDA graphs.",
     "example": "Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model "
                "is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
                "'--enforce-eager' in the CLI."},
    {"fact": {"enforce_eager": False}, "origin": V, "phrase": "Capturing cudagraphs for decoding.",
     "example": "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is "
                "not static. To run the model in eager mode, set 'enforce_eager=True' or use "
                "'--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, "
                "consider decreasing `gpu_memory_utilization` or switching to eager mode."},
    {"fact": {"cudagraph_captured": True, "capture_seconds": 12.0}, "origin": V,
     "phrase": "Graph capturing finished in", "after_kv": True,
     "example": "Graph capturing finished in 12 secs, took 0.52 GiB"},
    {"fact": {"tensor_parallel_size": 4, "enforce_eager": True, "model": "Qwen/Qwen2.5-7B-Instruct"},
     "origin": V, "phrase": "Initializing an LLM engine (v%s) with config: ",
     "example": "Initializing an LLM engine (v{version}) with config: model='Qwen/Qwen2.5-7B-Instruct', "
                "speculative_config=None, tokenizer='Qwen/Qwen2.5-7B-Instruct', dtype=torch.bfloat16, "
                "max_seq_len=32768, tensor_parallel_size=4, pipeline_parallel_size=1, enforce_eager=True, "
                "kv_cache_dtype=auto, quantization=None, seed=0"},
    {"fact": {"tensor_parallel_size": 2, "enforce_eager": True, "model": "meta-llama/Llama-3.1-8B-Instruct"},
     "origin": V, "phrase": "Initializing a V0 LLM engine (v%s) with config: ",
     "example": "Initializing a V0 LLM engine (v{version}) with config: "
                "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, "
                "tokenizer='meta-llama/Llama-3.1-8B-Instruct', max_seq_len=8192, "
                "tensor_parallel_size=2, pipeline_parallel_size=1, enforce_eager=True, quantization=None, "
                "use_cached_outputs=True"},
    {"fact": {"tensor_parallel_size": 2, "enforce_eager": False, "max_model_len": 8192},
     "origin": V, "phrase": "Initializing a V1 LLM engine (v%s) with config: ",
     "example": "Initializing a V1 LLM engine (v{version}) with config: model='Qwen/Qwen3-8B', "
                "speculative_config=None, tokenizer='Qwen/Qwen3-8B', max_seq_len=8192, "
                "tensor_parallel_size=2, pipeline_parallel_size=1, enforce_eager=False, quantization=None"},
    {"fact": {"gpu_blocks": 2048}, "origin": V, "phrase": "# GPU blocks: %d, # CPU blocks: %d",
     "example": "# GPU blocks: 2048, # CPU blocks: 512"},
    {"fact": {"kv_cache_tokens": 412160}, "origin": V, "phrase": "KV cache size: %s tokens",
     "example": "GPU KV cache size: 412,160 tokens"},
    {"fact": {"kv_cache_gib": 24.5}, "origin": V, "phrase": "Available KV cache memory: ",
     "example": "Available KV cache memory: 24.50 GiB"},
    {"fact": {"vllm_version": "{version}"}, "origin": V, "phrase": "vLLM API server version %s",
     "example": "vLLM API server version {version}"},
    {"fact": {"vllm_version": "{version}", "model": "Qwen/Qwen3-8B"}, "origin": V,
     "phrase": "vLLM server version %s",
     "example": "vLLM server version {version}, serving model Qwen/Qwen3-8B"},
    {"fact": {"tensor_parallel_size": 2, "model": "Qwen/Qwen3-8B"}, "origin": V,
     "phrase": "non-default args: %s",
     "example": "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', "
                "'tensor_parallel_size': 2}"},
    {"fact": {"served_port": 8001, "tensor_parallel_size": 4}, "origin": V, "phrase": "args: %s",
     "example": "args: Namespace(model='Qwen/Qwen2.5-7B-Instruct', port=8001, tensor_parallel_size=4, "
                "enforce_eager=False)"},
    {"fact": {"weights_gib": 14.9916}, "origin": V, "phrase": "Loading model weights took %.4f GB",
     "example": "Loading model weights took 14.9916 GB"},
    {"fact": {"weights_gib": 15.2683}, "origin": V, "phrase": "Model loading took",
     "example": "Model loading took 15.2683 GB and 14.817405 seconds"},
    {"fact": {"max_model_len": 40960}, "origin": V,
     "phrase": "Maximum concurrency for %s tokens per request: %.2fx",
     "example": "Maximum concurrency for 40,960 tokens per request: 10.06x"},
    {"fact": {"engine_init_seconds": 47.92}, "origin": V,
     "phrase": "init engine (profile, create kv cache, warmup model) took",
     "example": "init engine (profile, create kv cache, warmup model) took 47.92 seconds"},
    {"fact": {"served_port": 8000}, "origin": V, "phrase": "Starting vLLM API server %d on %s",
     "example": "Starting vLLM API server 0 on http://0.0.0.0:8000"},
    {"fact": {"max_model_len": 40960}, "origin": V, "phrase": "Using max model len %s",
     "example": "Using max model len 40960"},
    {"fact": {"model": "Qwen/Qwen3-8B"}, "origin": V, "phrase": "Starting to load model %s...",
     "example": "Starting to load model Qwen/Qwen3-8B..."},
    {"fact": {"max_num_batched_tokens": 8192}, "origin": V,
     "phrase": "Chunked prefill is enabled with max_num_batched_tokens=%d",
     "example": "Chunked prefill is enabled with max_num_batched_tokens=8192."},
]
# fmt: on
