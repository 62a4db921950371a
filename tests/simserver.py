"""Start `vllm-sim` as a real process for tests: free port, readiness on an event, cleanup in `finally`.

    with running_sim(["--tensor-parallel-size", "2"]) as sim:
        requests.get(sim.url + "/health")

Readiness is read from the log (uvicorn's `Application startup complete.`) with a deadline; the
whole process group is killed at the end, and what it left is reported, not ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.ports import free_port as free_port  # one port helper for every test module

SIM = Path(sys.executable).with_name("vllm-sim")
SNAPSHOT = Path(__file__).resolve().parent.parent / "vllm_flags" / "data" / "vllm-serve-schema-0.33.0.json"
READY_LINE = "Application startup complete."
# The default deadline of the helpers' waits: only a hang reaches it, however busy the host
# (docs/decisions/0013). A wait that passes returns at its event, long before.
HANG_S = 300.0
LAST_ROUTE = "Route: /v1/completions, Methods: POST"  # the last stdout line before ready

# A small vLLM option schema in the snapshot format (`vllm_flags/schema.py`): the flags the
# simulator's tests use. Built here on purpose: it is test data, not a snapshot of vLLM.
_V = "value"
TEST_OPTIONS: dict[str, dict[str, Any]] = {
    "--host": {"dest": "host", "kind": _V, "type": "str", "group": "Frontend"},
    "--port": {"dest": "port", "kind": _V, "type": "int", "group": "Frontend"},
    "--api-key": {"dest": "api_key", "kind": _V, "type": "str", "nargs": "+", "group": "Frontend"},
    "--enable-auto-tool-choice": {
        "dest": "enable_auto_tool_choice",
        "kind": "flag",
        "sets": True,
        "group": "Frontend",
    },
    "--tool-call-parser": {"dest": "tool_call_parser", "kind": _V, "type": "str", "group": "Frontend"},
    "--disable-uvicorn-access-log": {
        "dest": "disable_uvicorn_access_log",
        "kind": "flag",
        "sets": True,
        "group": "Frontend",
    },
    "--enable-prompt-tokens-details": {
        "dest": "enable_prompt_tokens_details",
        "kind": "flag",
        "sets": True,
        "group": "Frontend",
    },
    "--enable-request-id-headers": {
        "dest": "enable_request_id_headers",
        "kind": "flag",
        "sets": True,
        "group": "Frontend",
    },
    "--shutdown-timeout": {"dest": "shutdown_timeout", "kind": _V, "type": "int", "group": "Frontend"},
    "--model": {"dest": "model", "kind": _V, "type": "str", "group": "ModelConfig"},
    "--served-model-name": {
        "dest": "served_model_name",
        "kind": _V,
        "type": "str",
        "nargs": "+",
        "group": "ModelConfig",
    },
    "--max-model-len": {"dest": "max_model_len", "kind": _V, "type": "human_int", "group": "ModelConfig"},
    "--enforce-eager": {"dest": "enforce_eager", "kind": "flag", "sets": True, "group": "ModelConfig"},
    "--no-enforce-eager": {"dest": "enforce_eager", "kind": "flag", "sets": False, "group": "ModelConfig"},
    "--gpu-memory-utilization": {
        "dest": "gpu_memory_utilization",
        "kind": _V,
        "type": "float",
        "group": "CacheConfig",
    },
    "--block-size": {"dest": "block_size", "kind": _V, "type": "int", "group": "CacheConfig"},
    "--kv-cache-dtype": {"dest": "kv_cache_dtype", "kind": _V, "type": "str", "group": "CacheConfig"},
    "--enable-prefix-caching": {
        "dest": "enable_prefix_caching",
        "kind": "flag",
        "sets": True,
        "group": "CacheConfig",
    },
    "--disable-prefix-caching": {
        "dest": "enable_prefix_caching",
        "kind": "flag",
        "sets": False,
        "group": "CacheConfig",
    },
    "--tensor-parallel-size": {
        "dest": "tensor_parallel_size",
        "kind": _V,
        "type": "int",
        "group": "ParallelConfig",
    },
    "-tp": {"dest": "tensor_parallel_size", "kind": _V, "type": "int", "group": "ParallelConfig"},
    "--max-num-seqs": {"dest": "max_num_seqs", "kind": _V, "type": "int", "group": "SchedulerConfig"},
    "--max-num-batched-tokens": {
        "dest": "max_num_batched_tokens",
        "kind": _V,
        "type": "human_int",
        "group": "SchedulerConfig",
    },
    "--compilation-config": {
        "dest": "compilation_config",
        "kind": _V,
        "type": "json",
        "group": "CompilationConfig",
    },
    "-cc": {"dest": "compilation_config", "kind": _V, "type": "json", "group": "CompilationConfig"},
    "--cudagraph-capture-sizes": {
        "dest": "cudagraph_capture_sizes",
        "kind": _V,
        "type": "int",
        "nargs": "+",
        "group": "CompilationConfig",
    },
    "--max-cudagraph-capture-size": {
        "dest": "max_cudagraph_capture_size",
        "kind": _V,
        "type": "int",
        "group": "CompilationConfig",
    },
    "--optimization-level": {"dest": "optimization_level", "kind": _V, "type": "int", "group": "VllmConfig"},
    "--speculative-config": {"dest": "speculative_config", "kind": _V, "type": "json", "group": "VllmConfig"},
    "--reasoning-parser": {
        "dest": "reasoning_parser",
        "kind": _V,
        "type": "str",
        "group": "StructuredOutputsConfig",
    },
    "--disable-log-stats": {
        "dest": "disable_log_stats",
        "kind": "flag",
        "sets": True,
        "group": "ObservabilityConfig",
    },
}
TEST_SCHEMA: dict[str, Any] = {
    "format": 1,
    "vllm_version": "0.33.0",
    "source": "tests/simserver.py (test data)",
    "options": TEST_OPTIONS,
    "env_vars": [
        "VLLM_API_KEY",
        "VLLM_PROCESS_NAME_PREFIX",
        "VLLM_DISABLE_LOG_LOGO",
        "VLLM_LOGGING_PREFIX",
        "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH",
        "VLLM_LOG_STATS_INTERVAL",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    ],
}


def schema_file() -> Path:
    path = Path(tempfile.gettempdir()) / f"vllm-sim-test-schema-{os.getpid()}.json"
    if not path.exists():
        path.write_text(json.dumps(TEST_SCHEMA), encoding="utf-8")
    return path


def sim_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment minus any VLLM_* of the caller; the committed 0.33.0 schema snapshot is used
    unless the snapshot is missing (then the small test schema above)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    # the startup at 1000x the real tiny model's (~58 s, vllm_sim/timing.py): 0.06 s
    env.update({"VLLM_DISABLE_LOG_LOGO": "1", "PYTHONUNBUFFERED": "1", "VLLM_SIM_STARTUP_SPEED": "1000"})
    if not SNAPSHOT.exists():
        env["VLLM_SIM_SCHEMA"] = str(schema_file())
    env.update(extra or {})
    return env


@dataclass(eq=False)
class LogTail:
    """Collects a process's stdout and stderr in the background; waits on lines with deadlines."""

    lines: list[str] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    threads: list[threading.Thread] = field(default_factory=list)

    def follow(self, stream: Any, name: str, sink: Path) -> None:
        def pump() -> None:
            with open(sink, "a", encoding="utf-8") as out:
                for raw in iter(stream.readline, b""):
                    text = raw.decode("utf-8", "replace")
                    out.write(f"{name}\t{text}")
                    out.flush()
                    with self.cond:
                        self.lines.extend(f"{name}\t{part}" for part in text.rstrip("\n").split("\r"))
                        self.cond.notify_all()

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        self.threads.append(thread)

    def wait_for(self, text: str, timeout_s: float, start: int = 0) -> str | None:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                for line in self.lines[start:]:
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def text(self) -> str:
        with self.cond:
            return "\n".join(self.lines)


@dataclass(eq=False)
class SimHandle:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    tail: LogTail

    def wait_for(self, text: str, timeout_s: float = 10.0) -> str | None:
        return self.tail.wait_for(text, timeout_s)

    def drained(self, timeout_s: float = 5.0) -> str:
        """The whole log once the process tree closed its pipes (call after the process exited)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.tail.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return self.tail.text()

    def descendants(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            children: list[psutil.Process] = psutil.Process(self.proc.pid).children(recursive=True)
            return children
        return []


def start_sim(
    args: list[str],
    env: dict[str, str] | None = None,
    model: str = "Qwen/Qwen3-8B",
    speed: float = 50.0,
    log_dir: Path | None = None,
) -> SimHandle:
    port = free_port()
    log_path = (log_dir or Path(tempfile.mkdtemp(prefix="vllm-sim-"))) / "sim.log"
    argv = [
        str(SIM),
        "serve",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--sim-speed",
        str(speed),
        *args,
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sim_env(env), start_new_session=True
    )
    tail = LogTail()
    tail.follow(proc.stdout, "stdout", log_path)
    tail.follow(proc.stderr, "stderr", log_path)
    return SimHandle(f"http://127.0.0.1:{port}", port, proc, log_path, tail)


def kill_group(handle: SimHandle) -> None:
    """SIGKILL the whole process group and reap; the group is the sim's own session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(handle.proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        handle.proc.wait(5)
    for thread in handle.tail.threads:
        thread.join(2)


def group_members(pgid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            if os.getpgid(proc.pid) == pgid:
                found.append(proc)
    return found


@contextlib.contextmanager
def running_sim(
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    *,
    ready: bool = True,
    ready_timeout_s: float = HANG_S,
    **kwargs: Any,
) -> Iterator[SimHandle]:
    """A started simulator (ready unless `ready=False`), killed with its whole group afterwards."""
    handle = start_sim(args or [], env, **kwargs)
    try:
        # stdout and stderr are read by two threads: wait for the last line of each stream
        if ready and not (handle.wait_for(READY_LINE, ready_timeout_s) and handle.wait_for(LAST_ROUTE, 5.0)):
            raise AssertionError(
                f"vllm-sim not ready within {ready_timeout_s}s:\n{handle.tail.text()[-4000:]}"
            )
        yield handle
    finally:
        kill_group(handle)


def titled(handle: SimHandle, prefix: str) -> list[psutil.Process]:
    """Descendants whose title (cmdline) starts with `prefix`, e.g. `VLLM::EngineCore`."""
    found = []
    for proc in handle.descendants():
        with contextlib.suppress(psutil.NoSuchProcess):
            cmd = proc.cmdline()
            if cmd and cmd[0].startswith(prefix):
                found.append(proc)
    return found


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


def wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait (polling with a deadline) until none of `procs` runs; returns those still running."""
    deadline = time.monotonic() + timeout_s
    while alive(procs) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive(procs)


def connect_refused(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False
