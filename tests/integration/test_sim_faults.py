"""Every `--sim-*` fault does what it says: engine deaths, startup failures, memory, signals, orphans."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests

from tests.simserver import (
    READY_LINE,
    SimHandle,
    alive,
    kill_group,
    running_sim,
    start_sim,
    titled,
    wait_gone,
)

pytestmark = pytest.mark.integration

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
    },
}


def chat(sim: SimHandle, text: str, **extra: Any) -> requests.Response:
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0, **extra}
    return requests.post(sim.url + "/v1/chat/completions", json=body, timeout=10)


def health_code(sim: SimHandle) -> int | None:
    with contextlib.suppress(requests.ConnectionError):
        return requests.get(sim.url + "/health", timeout=2).status_code
    return None


def wait_health(sim: SimHandle, code: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if health_code(sim) == code:
            return True
        time.sleep(0.01)
    return False


def note_children_until(sim: SimHandle, line: str, timeout_s: float) -> list[psutil.Process]:
    """Every process the sim started until it logs `line`: polled from the start, because the
    injected crash follows the line within a millisecond at startup speed 1000 — a single look
    after the line could find the engine already gone."""
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in sim.descendants():
            seen.setdefault(proc.pid, proc)
        if sim.tail.wait_for(line, 0.005):
            seen.update((proc.pid, proc) for proc in sim.descendants() if proc.pid not in seen)
            return list(seen.values())
    return []


def engine_rss_mib(sim: SimHandle) -> float:
    rss_bytes: int = titled(sim, "VLLM::EngineCore")[0].memory_info().rss
    return rss_bytes / 2**20


def test_engine_death_after_ready_gives_503_then_exit_0() -> None:
    with running_sim(
        ["--sim-crash-at", "serving", "--sim-crash-after-s", "3", "--sim-watchdog-s", "8"], speed=10
    ) as sim:
        children = sim.descendants()
        assert wait_health(sim, 503, 5.0)
        dead = chat(sim, "hello")
        assert dead.status_code == 500
        assert dead.json()["error"]["message"] == "The server had an error while processing your request."
        assert sim.proc.wait(10) == 0  # vLLM issue #48966: engine death exits 0
        text = sim.drained()
        assert "EngineCore encountered a fatal error." in text
        assert "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup" in text
        assert "INFO:     Finished server process" in text
        assert wait_gone(children, 5.0) == []


def test_engine_death_after_n_requests() -> None:
    with running_sim(["--sim-crash-after-requests", "2"], speed=10) as sim:
        assert chat(sim, "hi").status_code == 200 and health_code(sim) == 200
        assert chat(sim, "hi again").status_code == 200
        assert wait_health(sim, 503, 5.0)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--sim-free-memory-gib", "10", "-tp", "2"],
            "ValueError: Free memory on device cuda:0 (10.00/80.00 GiB) on startup is less than desired "
            "GPU memory "
            "utilization (0.92, 73.60 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
            "other processes.",
        ),
        (["--sim-oom-at-capture"], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
        (["--sim-crash-at", "loading"], "RuntimeError: [vllm-sim] injected crash during loading"),
    ],
)
def test_startup_failures(args: list[str], expected: str) -> None:
    sim = start_sim(args)
    try:
        children = note_children_until(sim, "Using V2 Model Runner", 15.0)  # engine (and workers)
        assert children
        assert sim.proc.wait(20) == 1
        text = sim.drained()
        assert expected in text and "EngineCore failed to start." in text
        assert (
            "stderr\tRuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore': 1}"
        ) in text
        assert READY_LINE not in text
        assert wait_gone(children, 5.0) == []
        if "-tp" in args:
            assert "(Worker pid=" in text and "WorkerProc failed to start." in text
            assert "WorkerProc initialization failed due to an exception in a background process." in text
        if "loading" in args:
            assert "Loading weights took" not in text
    finally:
        kill_group(sim)


def test_capture_fallback_and_a_marker_at_warmup(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    args = [
        "--sim-capture-fallback",
        "--sim-marker",
        "IQ4XS_BMMVQ_READY",
        "--sim-ground-truth",
        str(truth),
        "--sim-decode-ms",
        "60",
    ]
    with running_sim(args, speed=10) as sim:
        text = sim.tail.text()
        assert "'cudagraph_capture_sizes': [1, 2]" in text and "'max_cudagraph_capture_size': 2" in text
        assert "Capturing CUDA graphs (PIECEWISE): 100%|██████████| 2/2" in text
        lines = sim.tail.lines
        marker = next(i for i, ln in enumerate(lines) if ln.endswith("] IQ4XS_BMMVQ_READY"))
        assert "(EngineCore pid=" in lines[marker]
        assert marker > next(i for i, ln in enumerate(lines) if "JIT kernel warmup finished" in ln)
        assert marker < next(i for i, ln in enumerate(lines) if "init engine (profile" in ln)
        chat(sim, "Tell me about trains", max_tokens=40, ignore_eos=True)
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(
                pool.map(
                    lambda i: chat(sim, f"Story {i} about ships", max_tokens=40, ignore_eos=True), range(4)
                )
            )
    # A batch of 4 falls out of the [1, 2] graphs and runs eager: its steps are 3x as long by the
    # rule (tests/unit/test_sim_rules.py); how that shows in the tokens' times is a figure
    # (bench/bench_figures.py `eager`). Here: each request, alone or in the batch, got every token.
    rows = [json.loads(x) for x in truth.read_text().splitlines()]
    assert [(r["output_tokens"], len(r["tokens"])) for r in rows] == [(40, 40)] * 5


def test_eager_fallback_and_a_marker_on_first_request() -> None:
    args = ["--sim-eager-fallback", "--sim-marker", "KERNEL_READY", "--sim-marker-phase", "serving"]
    with running_sim(args) as sim:
        text = sim.tail.text()
        assert (
            "Cudagraph mode FULL_AND_PIECEWISE is not compatible with compilation mode 0. Overriding to NONE."
            in text
        )
        assert "'cudagraph_mode': <CUDAGraphMode.NONE: 0>" in text and "enforce_eager=False" in text
        assert "WARNING" in text and "Skipping encoder and decoder CUDA graph capture." in text
        assert "Capturing CUDA graphs" not in text and "KERNEL_READY" not in text
        chat(sim, "hi")
        assert sim.wait_for("] KERNEL_READY", 5.0)


def _wait_until(check: object, timeout_s: float) -> bool:
    """An event wait: the deadline is a hang's, never part of what is proved."""
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    return bool(check())  # type: ignore[operator]


def test_leak_grows_rss_and_warmup_plateaus() -> None:
    leak = start_sim(["--sim-leak-mib-per-min", "3000"])
    warm = start_sim(["--sim-warmup-growth-mib", "60", "--sim-warmup-growth-s", "0.5"])
    try:
        assert leak.wait_for(READY_LINE, 15) and warm.wait_for(READY_LINE, 15)
        leak_base, warm_base = engine_rss_mib(leak), engine_rss_mib(warm)
        chat(warm, "hi")  # the allocator warms up with the first traffic
        assert _wait_until(lambda: engine_rss_mib(warm) - warm_base >= 58, 60)
        plateau, leak_mid = engine_rss_mib(warm), engine_rss_mib(leak)
        assert leak_mid > leak_base
        # The leak's own growth is the observation window (30 MiB: 0.6 s of its 50 MiB/s, however
        # long the host takes): the leak keeps going through it, the warm-up has stopped.
        assert _wait_until(lambda: engine_rss_mib(leak) - leak_mid >= 30, 60)
        assert engine_rss_mib(warm) - plateau < 3
    finally:
        kill_group(leak)
        kill_group(warm)


def test_sigterm_ignored_for_a_while() -> None:
    """Ignored: the server still answers after SIGTERM; then it shuts down by itself, cleanly."""
    with running_sim(["--sim-ignore-sigterm-s", "3600"]) as sim:
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert chat(sim, "still there?").status_code == 200
        assert "shutdown triggered" not in sim.tail.text() and sim.proc.poll() is None
    with running_sim(["--sim-ignore-sigterm-s", "0.6"]) as sim:
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.wait_for("[shutdown] API server: shutdown triggered", 60.0)
        assert sim.proc.wait(60) == 0


def test_orphans_survive_their_parent() -> None:
    with running_sim(["--sim-orphans"]) as sim:
        engine = titled(sim, "VLLM::EngineCore")[0]
        os.kill(sim.proc.pid, signal.SIGTERM)
        sim.proc.wait(10)
        time.sleep(0.3)  # give a (wrongly) obedient child the time to follow its parent
        assert alive([engine]) and engine.ppid() != sim.proc.pid
        engine.send_signal(signal.SIGTERM)
        with contextlib.suppress(psutil.TimeoutExpired):
            engine.wait(0.3)
        assert alive([engine])  # only SIGKILL removes it; running_sim's cleanup kills the group


@pytest.mark.parametrize(("version", "outlives"), [("0.33", False), ("0.26", True)])
def test_the_engine_after_its_api_server_is_sigkilled(version: str, outlives: bool) -> None:
    """0.26 as measured on the H200: the engine lives on (an orphan) but still obeys SIGTERM."""
    with running_sim(["--sim-vllm-version", version]) as sim:
        engine = titled(sim, "VLLM::EngineCore")[0]
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait(10)
        with contextlib.suppress(psutil.TimeoutExpired):
            # one that follows its parent ends this wait by going; one that outlives it is still there
            engine.wait(0.5 if outlives else 60)
        assert bool(alive([engine])) is outlives
        if outlives:
            engine.send_signal(signal.SIGTERM)
            engine.wait(10)


def test_model_level_faults(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    args = [
        "--sim-degenerate",
        "--sim-serve-model-name",
        "fable-27b",
        "--sim-slow-decode",
        "4",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--sim-tool-fault",
        "text",
        "--sim-ground-truth",
        str(truth),
    ]
    with running_sim(args, speed=10) as sim:
        models = requests.get(sim.url + "/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == ["fable-27b"]
        assert chat(sim, "hi", model="Qwen/Qwen3-8B").status_code == 404
        body = chat(sim, "Tell me about rivers", max_tokens=60).json()
        assert body["model"] == "fable-27b"
        words = body["choices"][0]["message"]["content"].split()
        assert len(set(words)) / len(words) < 0.2  # degenerate: one phrase over and over
        tool = chat(sim, "What is the weather in Paris?", tools=[WEATHER]).json()["choices"][0]
        assert "tool_calls" not in tool["message"] and '"name": "get_weather"' in tool["message"]["content"]
        assert tool["finish_reason"] == "stop"
    # the slow decode's step time is the time model's (tests/unit/test_sim_rules.py), its pace a
    # figure (bench/bench_figures.py `slow`); here the sim recorded every token it wrote
    rows = [json.loads(line) for line in truth.read_text().splitlines()]
    assert [len(r["tokens"]) for r in rows] == [r["output_tokens"] for r in rows] and 60 in [
        len(r["tokens"]) for r in rows
    ]
