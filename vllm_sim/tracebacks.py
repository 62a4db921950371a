"""Python-style tracebacks for simulated failures: frames name vLLM's files, the last line is the fact.

A frame is (path, line, function), as Python prints it; the source excerpt under each frame is left
out (it would be vLLM's code). The `_026` frames are vLLM 0.26.0's, read from the real free-memory
failure (tests/data/real-vllm-0.26/free-memory.log) and, where no run recorded them, from the
v0.26.0 source at the raise site (docs/simulator.md cites each).
"""

from __future__ import annotations

SITE = "/usr/local/lib/python3.12/dist-packages"
STDLIB = "/usr/lib/python3.12"
Frame = tuple[str, int, str]

ENGINE_FRAMES = (
    (f"{SITE}/vllm/v1/engine/core.py", 1575, "run_engine_core"),
    (f"{SITE}/vllm/v1/engine/core.py", 1264, "__init__"),
    (f"{SITE}/vllm/v1/engine/core.py", 118, "__init__"),
)
WORKER_FRAMES = (
    (f"{SITE}/vllm/v1/executor/multiproc_executor.py", 1049, "worker_main"),
    (f"{SITE}/vllm/v1/worker/gpu_worker.py", 289, "init_device"),
)
API_FRAMES = (
    ("/usr/local/bin/vllm", 10, "<module>"),
    (f"{SITE}/vllm/entrypoints/cli/main.py", 75, "main"),
    (f"{SITE}/vllm/entrypoints/cli/serve.py", 121, "cmd"),
    (f"{SITE}/vllm/entrypoints/launchers/api_server/entry.py", 160, "run_server"),
    (f"{SITE}/vllm/v1/engine/utils.py", 1473, "wait_for_engine_startup"),
)

# vLLM 0.26.0, `python -m vllm.entrypoints.cli.main serve` down to the API server's coroutine.
_V = f"{SITE}/vllm"
_API_RUN_026: tuple[Frame, ...] = (
    ("<frozen runpy>", 198, "_run_module_as_main"),
    ("<frozen runpy>", 88, "_run_code"),
    (f"{_V}/entrypoints/cli/main.py", 101, "<module>"),
    (f"{_V}/entrypoints/cli/main.py", 95, "main"),
    (f"{_V}/entrypoints/cli/serve.py", 148, "cmd"),
    (f"{SITE}/uvloop/__init__.py", 96, "run"),
    (f"{STDLIB}/asyncio/runners.py", 194, "run"),
    (f"{STDLIB}/asyncio/runners.py", 118, "run"),
    ("uvloop/loop.pyx", 1515, "uvloop.loop.Loop.run_until_complete"),
    (f"{SITE}/uvloop/__init__.py", 48, "wrapper"),
)
# `setup_server` validates the tool-call parser after logging the banner and `non-default args:`
# (entrypoints/openai/api_server.py:616-628, the KeyError at :600), then binds the port (:637, the
# OSError as the real port-in-use run logged it, record/port).
_SETUP_026 = (*_API_RUN_026, (f"{_V}/entrypoints/openai/api_server.py", 758, "run_server"))
API_SETUP_026: tuple[Frame, ...] = (
    *_SETUP_026,
    (f"{_V}/entrypoints/openai/api_server.py", 628, "setup_server"),
    (f"{_V}/entrypoints/openai/api_server.py", 600, "validate_api_server_args"),
)
API_BIND_026: tuple[Frame, ...] = (
    *_SETUP_026,
    (f"{_V}/entrypoints/openai/api_server.py", 637, "setup_server"),
    (f"{_V}/entrypoints/openai/api_server.py", 586, "create_server_socket"),
)
_CLIENT_026 = (
    *_API_RUN_026,
    (f"{_V}/entrypoints/openai/api_server.py", 759, "run_server"),
    (f"{_V}/entrypoints/openai/api_server.py", 773, "run_server_worker"),
    (f"{STDLIB}/contextlib.py", 210, "__aenter__"),
    (f"{_V}/entrypoints/openai/api_server.py", 139, "build_async_engine_client"),
    (f"{STDLIB}/contextlib.py", 210, "__aenter__"),
)
# An unknown reasoning parser fails while the engine config is built (real run record/reasoning).
API_CONFIG_026: tuple[Frame, ...] = (
    *_CLIENT_026,
    (f"{_V}/entrypoints/openai/api_server.py", 163, "build_async_engine_client_from_engine_args"),
    (f"{_V}/engine/arg_utils.py", 2372, "create_engine_config"),
    (f"{SITE}/pydantic/_internal/_dataclasses.py", 121, "__init__"),
    (f"{_V}/config/vllm.py", 1554, "__post_init__"),
    (f"{_V}/config/reasoning.py", 77, "initialize_token_ids"),
    (f"{_V}/reasoning/abs_reasoning_parsers.py", 245, "get_reasoning_parser"),
)
# `Engine core initialization failed` as the real free-memory failure logged it (24 frames).
API_STARTUP_026: tuple[Frame, ...] = (
    *_CLIENT_026,
    (f"{_V}/entrypoints/openai/api_server.py", 175, "build_async_engine_client_from_engine_args"),
    (f"{_V}/v1/engine/async_llm.py", 217, "from_vllm_config"),
    (f"{_V}/v1/engine/async_llm.py", 146, "__init__"),
    (f"{_V}/v1/engine/core_client.py", 132, "make_async_mp_client"),
    (f"{_V}/v1/engine/core_client.py", 963, "__init__"),
    (f"{_V}/v1/engine/core_client.py", 573, "__init__"),
    (f"{STDLIB}/contextlib.py", 144, "__exit__"),
    (f"{_V}/v1/engine/utils.py", 1213, "launch_core_engines"),
    (f"{_V}/v1/engine/utils.py", 1272, "wait_for_engine_startup"),
)
_ENGINE_HEAD_026: tuple[Frame, ...] = (
    (f"{_V}/v1/engine/core.py", 1299, "run_engine_core"),
    (f"{_V}/v1/engine/core.py", 1065, "__init__"),
)
# Where the engine raised, by failure: the recorded free-memory chain (one GPU, uniproc executor);
# the KV-cache refusal from the source (core.py:136 → :297 → kv_cache_utils.py:2132 → :758/:778).
ENGINE_026: dict[str, tuple[Frame, ...]] = {
    "free_memory": (
        *_ENGINE_HEAD_026,
        (f"{_V}/v1/engine/core.py", 125, "__init__"),
        (f"{_V}/v1/executor/abstract.py", 109, "__init__"),
        (f"{_V}/v1/executor/uniproc_executor.py", 63, "_init_executor"),
        (f"{_V}/v1/worker/worker_base.py", 331, "init_device"),
        (f"{_V}/v1/worker/gpu_worker.py", 389, "init_device"),
        (f"{_V}/v1/worker/utils.py", 435, "request_memory"),
    ),
    "kv_cache": (
        *_ENGINE_HEAD_026,
        (f"{_V}/v1/engine/core.py", 136, "__init__"),
        (f"{_V}/v1/engine/core.py", 297, "_initialize_kv_caches"),
        (f"{_V}/v1/core/kv_cache_utils.py", 2132, "get_kv_cache_configs"),
    ),
}
# The API server's output handler when the engine is gone (record/eager, engine SIGKILLed).
OUTPUT_HANDLER_026: tuple[Frame, ...] = (
    (f"{_V}/v1/engine/async_llm.py", 660, "output_handler"),
    (f"{_V}/v1/engine/core_client.py", 1061, "get_output_async"),
)
# multiprocessing prints the engine's exception again, under `Process EngineCore:` (core.py:1334
# re-raises it after logging `EngineCore failed to start.`).
PROCESS_026: tuple[Frame, ...] = (
    (f"{STDLIB}/multiprocessing/process.py", 314, "_bootstrap"),
    (f"{STDLIB}/multiprocessing/process.py", 108, "run"),
    (f"{_V}/v1/engine/core.py", 1334, "run_engine_core"),
)


def engine_frames_026(where: str, last: str) -> tuple[Frame, ...]:
    """0.26.0's engine frames for a failure raised at `where` (the KV refusals end in their raise)."""
    if where == "kv_cache":
        line = 758 if "No available memory" in last else 778
        return (
            *ENGINE_026["kv_cache"],
            (f"{_V}/v1/core/kv_cache_utils.py", line, "_check_enough_kv_cache_memory"),
        )
    return ENGINE_026.get(where, _ENGINE_HEAD_026)


def traceback_text(frames: tuple[Frame, ...], last: str) -> str:
    """`Traceback (most recent call last):`, one line per frame (no source), then `last`."""
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "{path}", line {line}, in {func}' for path, line, func in frames]
    lines.append(last)
    return "\n".join(lines)


# A utility call that raises inside the engine core: `_invoke_utility_method` logs it with
# `logger.exception` (0.26.0 v1/engine/core.py:1548) and the API server gets the failure message.
_UTILITY_026: tuple[Frame, ...] = ((f"{_V}/v1/engine/core.py", 1538, "_invoke_utility_method"),)
SLEEP_MODE_026: tuple[Frame, ...] = (
    *_UTILITY_026,
    (f"{_V}/v1/engine/core.py", 875, "sleep"),
    (f"{_V}/v1/engine/core.py", 1781, "pause_scheduler"),
)
WAKE_UP_026: tuple[Frame, ...] = (
    *_UTILITY_026,
    (f"{_V}/v1/engine/core.py", 909, "wake_up"),
    (f"{_V}/v1/executor/abstract.py", 343, "wake_up"),
    (f"{_V}/v1/executor/uniproc_executor.py", 92, "collective_rpc"),
    (f"{_V}/v1/serial_utils.py", 510, "run_method"),
    (f"{_V}/v1/worker/gpu_worker.py", 228, "wake_up"),
    (f"{_V}/device_allocator/sleep_mode_backend.py", 132, "resume"),
    (f"{_V}/device_allocator/cumem.py", 297, "wake_up"),
)
# A wake-up with no room on the GPU (vllm-facts.md §16): the pool's cuMemCreate fails in the C
# extension, which raises from under `create_and_map` (no Python frame of its own).
CUMEM_MAP_026: tuple[Frame, ...] = ((f"{_V}/device_allocator/cumem.py", 51, "create_and_map"),)
# With TP > 1 each worker raises as above under its busy loop; the executor raises its own
# RuntimeError from the response (the Future's frames between them left out).
WORKER_WAKE_UP_026: tuple[Frame, ...] = (
    (f"{_V}/v1/executor/multiproc_executor.py", 999, "worker_busy_loop"),
    (f"{_V}/v1/worker/gpu_worker.py", 228, "wake_up"),
    (f"{_V}/device_allocator/sleep_mode_backend.py", 132, "resume"),
    (f"{_V}/device_allocator/cumem.py", 297, "wake_up"),
    *CUMEM_MAP_026,
)
WAKE_UP_TP_026: tuple[Frame, ...] = (
    *_UTILITY_026,
    (f"{_V}/v1/engine/core.py", 909, "wake_up"),
    (f"{_V}/v1/executor/abstract.py", 343, "wake_up"),
    (f"{_V}/v1/executor/multiproc_executor.py", 405, "collective_rpc"),
    (f"{_V}/v1/executor/multiproc_executor.py", 95, "_wait_for_response"),
    (f"{_V}/v1/executor/multiproc_executor.py", 394, "get_response"),
)
