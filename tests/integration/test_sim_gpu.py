"""`--sim-gpu-allocate` holds real GPU memory that NVML sees (needs torch with CUDA; skipped otherwise)."""

from __future__ import annotations

import importlib.util
import os
import signal
import time

import pytest
import requests

from tests.simserver import running_sim

pytestmark = pytest.mark.integration


def _nvml_used_gib() -> tuple[float, float]:
    import pynvml

    pynvml.nvmlInit()
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
        return float(info.used) / 2**30, float(info.total) / 2**30
    finally:
        pynvml.nvmlShutdown()


def _cuda_ready() -> bool:
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("pynvml") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ready(), reason="needs torch with a CUDA device and NVML")
def test_gpu_allocate_holds_util_times_total_until_stopped() -> None:
    before, total = _nvml_used_gib()
    args = ["--sim-gpu-allocate", "--gpu-memory-utilization", "0.2", "--sim-gpu-memory-gib", f"{total:.0f}"]
    with running_sim(args, ready_timeout_s=120) as sim:
        held, _ = _nvml_used_gib()
        assert held - before >= 0.15 * total, (before, held, total)
        assert "holds nothing" not in sim.tail.text()
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.proc.wait(30) == 0
    deadline = time.monotonic() + 30
    while _nvml_used_gib()[0] - before > 0.05 * total and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _nvml_used_gib()[0] - before <= 0.05 * total  # released with the process


@pytest.mark.skipif(_cuda_ready(), reason="this machine has CUDA: the GPU test above covers it")
def test_gpu_allocate_without_cuda_says_so_and_serves() -> None:
    with running_sim(["--sim-gpu-allocate"]) as sim:
        assert sim.wait_for("vllm-sim: --sim-gpu-allocate holds nothing:", 5.0)
        assert requests.get(sim.url + "/health", timeout=5).status_code == 200
