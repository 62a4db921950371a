"""vllm-sim starts, logs and stops like vLLM 0.33: the log sequence, titles, refusal before ready, stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import pytest
import requests

from tests.simserver import (
    SIM,
    connect_refused,
    kill_group,
    running_sim,
    sim_env,
    start_sim,
    titled,
    wait_gone,
)

pytestmark = pytest.mark.integration

ORDER = [
    "vLLM server version 0.33.0, serving model Qwen/Qwen3-8B",
    "non-default args: {'model_tag': 'Qwen/Qwen3-8B'",
    "Chunked prefill is enabled with max_num_batched_tokens=8192.",
    "Initializing a V1 LLM engine (v0.33.0) with config:",
    "Using V2 Model Runner",
    "Loading model from scratch...",
    "Loading weights took",
    "Model loading took",
    "[backbone] torch.compile took",
    "Graph capturing finished in",  # the V2 profiling pass, before the KV cache
    "Available KV cache memory:",
    "GPU KV cache size:",
    "JIT kernel warmup finished in",
    "Graph capturing finished in",  # the real capture
    "init engine (profile, create kv cache, warmup model) took",
    "Supported tasks: ['generate']",
    '"auto" tool choice has been enabled.',
    "Starting vLLM server on http://127.0.0.1:",
    "Available routes are:",
]
UVICORN = [
    "INFO:     Started server process [",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
]


def test_startup_log_follows_vllm_033() -> None:
    args = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-num-seqs", "256"]
    with running_sim(args, {"VLLM_FOO_BAR": "1"}) as sim:
        lines = sim.tail.lines[:]
    assert any(
        "WARNING" in ln and "Unknown vLLM environment variable detected: VLLM_FOO_BAR" in ln for ln in lines
    )
    stdout = [ln.split("\t", 1)[1] for ln in lines if ln.startswith("stdout\t")]
    stderr = [ln.split("\t", 1)[1] for ln in lines if ln.startswith("stderr\t")]
    for stream, wanted_lines in ((stdout, ORDER), (stderr, UVICORN)):  # each stream keeps its own order
        at = 0
        for wanted in wanted_lines:
            at = next((i for i in range(at, len(stream)) if wanted in stream[i]), -1)
            assert at >= 0, f"missing or out of order: {wanted}"
    assert all(
        re.match(
            r"\((APIServer|EngineCore) pid=\d+\) (INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d \[\w+\.py:\d+\] ", ln
        )
        for ln in stdout
    )
    config = next(ln for ln in stdout if "Initializing a V1 LLM engine" in ln)
    assert "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>" in config
    assert "'max_cudagraph_capture_size': 512" in config and "enforce_eager=False" in config
    assert re.search(
        r"GPU KV cache size: [\d,]+ tokens, Maximum concurrency for 40,960 tokens per request: \d+\.\d\dx",
        "\n".join(stdout),
    )
    bars = [ln for ln in stderr if ln.startswith("Capturing CUDA graphs")]
    finals = [b for b in bars if "100%" in b]
    # profiling pass: all PIECEWISE + 2 FULL; then the real capture: 51 PIECEWISE, 35 FULL (max_num_seqs=256)
    assert [re.search(r"\d+/\d+", b).group(0) for b in finals] == ["51/51", "2/2", "51/51", "35/35"]  # type: ignore[union-attr]
    assert any(ln.startswith("Loading safetensors checkpoint shards: 100% Completed | 4/4") for ln in stderr)


def test_tensor_parallel_titles_per_rank_lines_and_clean_stop() -> None:
    env = {"VLLM_PROCESS_NAME_PREFIX": "VLLMgate-t1"}
    with running_sim(["--tensor-parallel-size", "2"], env) as sim:
        engines = titled(sim, "VLLMgate-t1::EngineCore")
        workers = sorted(p.cmdline()[0] for p in titled(sim, "VLLMgate-t1::Worker_TP"))
        assert len(engines) == 1 and workers == ["VLLMgate-t1::Worker_TP0", "VLLMgate-t1::Worker_TP1"]
        assert all(w.ppid() == engines[0].pid for w in titled(sim, "VLLMgate-t1::Worker_TP"))
        assert engines[0].ppid() == sim.proc.pid and "vllm-sim" in " ".join(psutil_cmd(sim.proc.pid))
        text = sim.tail.text()
        assert re.search(r"\(Worker_TP0 pid=\d+\) INFO .* Available KV cache memory", text)
        assert re.search(r"\(Worker_TP1 pid=\d+\) INFO .* Available KV cache memory", text)
        everyone = sim.descendants()
        assert all(os.getpgid(p.pid) == sim.proc.pid for p in everyone)  # one process group, no setpgrp
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.proc.wait(10) == 0
        assert wait_gone(everyone, 5.0) == []
        assert "[shutdown] EngineCore: trigger received signal=SIGTERM" in sim.drained()


def psutil_cmd(pid: int) -> list[str]:
    import psutil

    cmdline: list[str] = psutil.Process(pid).cmdline()
    return cmdline


def test_port_refuses_connections_until_ready_and_sigterm_during_startup_stops_all() -> None:
    sim = start_sim(["--sim-hang-at", "profiling"])
    try:
        assert sim.wait_for("Loading weights took", 15.0)
        assert connect_refused(sim.port)
        assert sim.proc.poll() is None
        children = sim.descendants()
        os.kill(sim.proc.pid, signal.SIGTERM)
        sim.proc.wait(10)
        assert sim.proc.returncode == -signal.SIGINT  # uncaught KeyboardInterrupt("terminated")
        assert wait_gone(children, 5.0) == []
        assert "KeyboardInterrupt: terminated" in sim.drained()
    finally:
        kill_group(sim)


def test_dialect_026_as_the_real_026_logged_it() -> None:
    """Forms checked against tests/data/real-vllm-0.26/ (test_sim_fidelity.py compares whole logs)."""
    with running_sim(["--sim-vllm-version", "0.26", "--max-num-seqs", "16"]) as sim:
        text = sim.tail.text()
        kv = r"\(EngineCore pid=\d+\) INFO .* \[kv_cache_utils.py:2177\] GPU KV cache size: [\d,]+ tokens\n"
        assert re.search(kv, text)
        assert re.search(r"Maximum concurrency for 40,960 tokens per request: [\d.]+x", text)
        assert "Starting vLLM server on http://127.0.0.1:" in text and "Using V2 Model Runner" in text
        assert "Starting torch.compile" not in text and "JIT kernel warmup" not in text
        # _add_prefix: the prefix, then tqdm's `\r` redraws (split at `\r` by the tail), on stderr
        bar = r"stderr\t\(EngineCore pid=\d+\) \nstderr\tCapturing CUDA graphs \(PIECEWISE\)"
        assert re.search(bar, text)
        assert "Capturing CUDA graphs (FULL): 100%" in text
        assert re.search(r"stderr\t\(APIServer pid=\d+\) INFO:     Application startup complete.", text)
        assert titled(sim, "VLLM::EngineCore")
        metrics = requests.get(sim.url + "/metrics", timeout=5).text
        assert "vllm:kv_cache_usage_perc" in metrics and "vllm:gpu_cache_usage_perc" not in metrics
        assert requests.get(sim.url + "/version", timeout=5).json() == {"version": "0.26.0"}


def test_enforce_eager_captures_nothing() -> None:
    with running_sim(["--enforce-eager"]) as sim:
        text = sim.tail.text()
    assert "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup." in text
    assert "Capturing CUDA graphs" not in text and "Graph capturing finished" not in text
    assert "'cudagraph_capture_sizes': []" in text and "enforce_eager=True" in text
    assert "JIT kernel warmup starting." not in text and "Starting torch.compile" not in text


def test_unknown_flag_exits_2_with_usage() -> None:
    result = subprocess.run(
        [str(SIM), "serve", "m", "--cuda-graph-sizes", "1", "2"],
        env=sim_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "usage: vllm" in result.stderr
    assert "vllm: error: unrecognized arguments: --cuda-graph-sizes 1 2" in result.stderr


def test_busy_port_fails_before_the_engine_starts() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        busy = subprocess.run(
            [str(SIM), "serve", "m", "--host", "127.0.0.1", "--port", str(port)],
            env=sim_env(),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert busy.returncode == 1 and "OSError: [Errno 98] Address already in use" in busy.stderr
    assert "Initializing a V1 LLM engine" not in busy.stdout  # it fails before the engine starts


def test_026_refuses_an_unknown_tool_parser_after_its_banner_and_args() -> None:
    """vLLM 0.26.0 validates the tool-call parser in setup_server (entrypoints/openai/api_server.py:
    616-628), after the banner and `non-default args:`, against its own 44 names. (An unknown
    reasoning parser fails later, as the real record/reasoning run shows: test_sim_fidelity.)"""
    flags, kind, known, line = (
        ["--enable-auto-tool-choice", "--tool-call-parser", "hermez"],
        "tool call",
        44,
        600,
    )
    result = subprocess.run(
        [str(SIM), "serve", "m", "--sim-vllm-version", "0.26", "--port", "1", *flags],
        env=sim_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    lines = (result.stdout + result.stderr).splitlines()
    banner = next(i for i, x in enumerate(lines) if "version 0.26.0" in x)
    args = next(i for i, x in enumerate(lines) if "non-default args: " in x)
    error = next(i for i, x in enumerate(lines) if f"KeyError: 'invalid {kind} parser: " in x)
    assert banner < args < error and not any("Found ulimit" in x for x in lines)
    frames = [x for x in lines if '  File "' in x]
    assert len(frames) == 13 and frames[-1].endswith(f"line {line}, in validate_api_server_args")
    names = lines[error].split("(chose from { ", 1)[1].split(" })", 1)[0].split(",")
    assert len(names) == known and names == sorted(names)


def test_the_console_script_and_python_m_vllm_sim_are_one_entry_point() -> None:
    runs = [
        subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
        for argv in ([str(SIM)], [sys.executable, "-m", "vllm_sim"])
    ]
    assert [(r.returncode, r.stdout) for r in runs] == [(0, "0.33.0\n")] * 2, [r.stderr for r in runs]
