"""Two readings of one truth: what the simulator was asked to produce (its own configuration and
memory plan) against what the log parser reads back from its log — for a clean start and every
startup fault. Neither side imports the other's code for this; the test holds both."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from launcher.logfacts.logfile import parse_file
from tests.simserver import SIM, free_port, sim_env
from vllm_flags.schema import load_snapshot
from vllm_sim.config import from_namespace
from vllm_sim.memory import plan_memory
from vllm_sim.serve_args import parse

pytestmark = pytest.mark.integration
MODEL = "Qwen/Qwen3-8B"


def run_sim(tmp_path: Path, args: Sequence[str], *, until: str | None, timeout_s: float = 30) -> Path:
    """Run `vllm-sim` with stdout and stderr in one file (as the launcher reads it); stop it with
    SIGTERM once `until` shows, or let a failing start end by itself."""
    log = tmp_path / "sim.log"
    argv = [
        str(SIM),
        "serve",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
        "--sim-speed",
        "50",
        *args,
    ]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, env=sim_env(), start_new_session=True
        )
    try:
        if until is not None:
            _wait_text(log, until, timeout_s, proc)
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["pkill", "-KILL", "-g", str(proc.pid)], check=False)
    return log


def _wait_text(log: Path, text: str, timeout_s: float, proc: subprocess.Popen[bytes]) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"the simulator exited first:\n{log.read_text()[-3000:]}")
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared:\n{log.read_text()[-3000:]}")


def asked(args: Sequence[str]) -> Any:
    """The simulator's own reading of these flags: its configuration and memory plan."""
    schema = load_snapshot()
    config = from_namespace(parse(["serve", MODEL, *args], schema, environ={}), schema, environ={})
    memory = plan_memory(
        model=config.model, total_gib=config.gpu_total_gib, free_gib=config.gpu_free_gib, util=config.util,
        tp=config.tp, weights_override=config.weights_gib, bytes_per_token_override=config.kv_bytes_per_token,
        kv_dtype=config.kv_cache_dtype, mnbt=config.max_num_batched_tokens,
        graphs=len(config.graphs.piecewise_sizes) + len(config.graphs.full_sizes),
        block_size=config.block_size, max_model_len=config.max_model_len,
    )  # fmt: skip
    return config, memory


CLEAN = {
    "tp1": ["--max-num-seqs", "8", "-cc", '{"cudagraph_capture_sizes": [1, 2, 4, 8]}'],
    "tp2": ["--tensor-parallel-size", "2", "--max-num-seqs", "64"],
    "eager": ["--enforce-eager", "--max-model-len", "4096"],
    "spec": [
        "--max-num-seqs",
        "16",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 1}',
    ],
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_a_clean_start_reads_back_as_configured(case: str, tmp_path: Path) -> None:
    args = CLEAN[case]
    config, memory = asked(args)
    facts = parse_file(run_sim(tmp_path, args, until="Application startup complete."))[0].to_json()
    assert facts["outcome"] == "ready" and facts["failure_kind"] is None
    assert facts["kv_cache_tokens"] == memory.kv_tokens
    assert facts["max_concurrency"]["max_model_len"] == config.max_model_len
    assert facts["enforce_eager"] is config.enforce_eager
    if config.enforce_eager:
        assert facts["cudagraph_captured"] is False and not facts["graphs_captured"]
        return
    assert facts["capture_sizes"] == list(config.graphs.sizes)
    assert facts["graphs_captured_by_mode"] == {
        "PIECEWISE": len(config.graphs.piecewise_sizes),
        "FULL": len(config.graphs.full_sizes),
    }
    if config.tp > 1:
        # 0.33 logs the KV size once, from EngineCore; "Available KV cache memory" comes from every rank.
        assert facts["tensor_parallel_size"] == config.tp


FAULTS = {
    "free_memory": (["--sim-free-memory-gib", "10", "--gpu-memory-utilization", "0.5"], "free_memory"),
    "oom_at_capture": (["--sim-oom-at-capture"], "oom"),
    "crash_loading": (["--sim-crash-at", "loading"], "engine_init"),
    "kv_too_small": (["--max-model-len", "40000", "--gpu-memory-utilization", "0.2"], "kv_cache_too_small"),
    "config": (["--max-model-len", "8192", "--sim-model-max-len", "4096"], "config"),
}


@pytest.mark.parametrize("case", sorted(FAULTS))
def test_each_startup_fault_reads_back_as_its_failure_kind(case: str, tmp_path: Path) -> None:
    args, kind = FAULTS[case]
    facts = parse_file(run_sim(tmp_path, args, until=None))[0].to_json()
    assert facts["outcome"] == "failed"
    assert facts["failure_kind"] == kind, facts["failure_line"]
    assert facts["failure_line"]


def test_fallback_eager_and_marker_faults_read_back(tmp_path: Path) -> None:
    fallback = parse_file(
        run_sim(tmp_path, ["--sim-capture-fallback"], until="Application startup complete.")
    )
    assert fallback[0].to_json()["capture_sizes"] == [1, 2]
    (tmp_path / "b").mkdir()
    eager = parse_file(
        run_sim(tmp_path / "b", ["--sim-eager-fallback"], until="Application startup complete.")
    )
    assert eager[0].to_json()["cudagraph_captured"] is False
    (tmp_path / "c").mkdir()
    log = run_sim(tmp_path / "c", ["--sim-marker", "FABLE_READY"], until="Application startup complete.")
    assert parse_file(log, markers=["FABLE_READY"])[0].to_json()["markers"]
