"""Python-style tracebacks for simulated failures: frames name vLLM's files, the last line is the fact."""

from __future__ import annotations

SITE = "/usr/local/lib/python3.12/dist-packages"

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


def traceback_text(frames: tuple[tuple[str, int, str], ...], last: str) -> str:
    """`Traceback (most recent call last):`, one line per frame (no source), then `last`."""
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "{path}", line {line}, in {func}' for path, line, func in frames]
    lines.append(last)
    return "\n".join(lines)
