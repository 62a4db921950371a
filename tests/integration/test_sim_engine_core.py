"""The engine core is the process that makes tokens (issue 31): SIGSTOP it and every stream stops
while /health stays 200 and the engine-published gauges freeze; the serving faults that wedge it.

Real processes throughout: the simulator in its own session, real signals, HTTP on loopback.
"""

from __future__ import annotations

import json
import signal
import time

import psutil
import pytest
import requests

from tests.integration.sim_support import (
    Stream,
    answer,
    chat,
    engine_core,
    health,
    log_line,
    metric,
    stopped,
)
from tests.simserver import kill_group, running_sim, start_sim, wait_gone

pytestmark = pytest.mark.integration

LONG = {
    "messages": [{"role": "user", "content": "Tell me a long story."}],
    "max_tokens": 400,
    "ignore_eos": True,
}
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
GENERATED = "vllm:generation_tokens_total"
INTERNAL = {
    "error": {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}
}


def test_a_stopped_engine_core_answers_nothing_and_recovers_after_sigcont() -> None:
    """As measured on vLLM 0.26.0: /health 200, running 0 and waiting 0 though a request waits,
    a completion gets nothing, and after SIGCONT the waiting request is answered."""
    with running_sim(["--sim-vllm-version", "0.26"], speed=50) as sim:
        before = answer(sim, "What is 17 + 25?")
        with stopped(engine_core(sim)):
            stream = Stream(sim, {"messages": [{"role": "user", "content": "What is 17 + 25?"}],
                                  "temperature": 0}).start()  # fmt: skip
            stream.wait_head()  # the request is in the scheduler's queue; no chunk before its first token
            assert health(sim) == 200
            assert metric(sim, RUNNING) == 0 and metric(sim, WAITING) == 0  # not counted: not published
            with pytest.raises(requests.Timeout):
                chat(sim, "hello", timeout_s=1.0)
            assert stream.events == [] and not stream.done.is_set()
        events = stream.finish()
        assert events[-1] == "[DONE]" and stream.text() == before
        assert answer(sim, "What is 17 + 25?") == before
        assert metric(sim, RUNNING) == 0 and metric(sim, WAITING) == 0  # published again, all done


def test_stopping_the_engine_core_mid_stream_freezes_the_stream_and_the_gauges() -> None:
    with running_sim(["--sim-decode-ms", "20"], speed=10) as sim:  # 2 ms steps
        stream = Stream(sim, LONG).start()
        stream.wait_events(20)
        with stopped(engine_core(sim)):
            seen, generated = len(stream.events), metric(sim, GENERATED)
            assert metric(sim, RUNNING) == 1  # the last figures the engine published
            time.sleep(0.5)  # an observation window: a running engine makes ~250 steps in it
            # The API server grants one step at a time: the one in flight at the stop may still land
            # after the first reading (a busy host was seen to read 20, then 21).
            assert len(stream.events) - seen <= 2 and metric(sim, GENERATED) - generated <= 1
            assert health(sim) == 200
        events = stream.finish()
        assert (
            sum(1 for c in stream.chunks() if c["choices"] and c["choices"][0]["delta"].get("content")) == 400
        )
        assert events[-1] == "[DONE]"


def test_stopping_the_api_server_hangs_everything_and_sigcont_restores_it() -> None:
    with running_sim(speed=50) as sim:
        before = answer(sim, "say hello")
        api = psutil.Process(sim.proc.pid)
        with stopped(api):
            with pytest.raises(requests.Timeout):
                requests.get(sim.url + "/health", timeout=1.0)
            assert engine_core(sim).status() != psutil.STATUS_ZOMBIE
        assert health(sim) == 200 and answer(sim, "say hello") == before
        assert metric(sim, RUNNING) == 0


def test_hang_after_n_requests_wedges_the_engine_core_until_sigkill() -> None:
    with running_sim(["--sim-hang-after-requests", "2"], speed=50) as sim:
        assert answer(sim, "hi") and answer(sim, "hi again")
        stream = Stream(sim, LONG).start()
        stream.wait_head()
        with pytest.raises(requests.Timeout):
            chat(sim, "are you there?", timeout_s=1.0)
        assert health(sim) == 200 and stream.events == []
        assert metric(sim, RUNNING) == 0 and metric(sim, WAITING) == 0  # frozen before they arrived
        assert metric(sim, "vllm:request_success_total", 'finished_reason="stop"') == 2
        engine = engine_core(sim)
        engine.send_signal(signal.SIGTERM)
        assert log_line(sim, r"\[shutdown\] EngineCore: trigger received signal=SIGTERM")
        assert wait_gone([engine], 1.0) == [engine]  # a kernel that never returns: SIGTERM does nothing
        engine.send_signal(signal.SIGKILL)
        assert wait_gone([engine], 10.0) == []
        assert log_line(sim, r"engine core exited unexpectedly")
        assert stream.done.wait(30)  # the stream ends once the engine is gone


def test_a_stall_after_n_tokens_leaves_requests_running() -> None:
    args = ["--sim-stall-after-tokens", "30", "--sim-vllm-version", "0.26"]
    with running_sim(args, speed=50) as sim:
        stream = Stream(sim, LONG).start()
        stream.wait_events(10)
        generated = metric(sim, GENERATED)
        deadline = time.monotonic() + 10
        while True:  # the counter settles where the engine stopped, mid-batch
            time.sleep(0.2)
            now = metric(sim, GENERATED)
            if now == generated:
                break
            generated = now
            assert time.monotonic() < deadline
        assert 30 <= generated < 40 and not stream.done.is_set()
        assert metric(sim, RUNNING) == 1 and health(sim) == 200
        with pytest.raises(requests.Timeout):
            chat(sim, "hello", timeout_s=1.0)


def test_errors_after_n_requests_answer_500_while_health_stays_200() -> None:
    with running_sim(["--sim-error-after-requests", "1", "--sim-vllm-version", "0.26"], speed=50) as sim:
        assert answer(sim, "hi")
        failed = chat(sim, "hi")
        assert failed.status_code == 500
        assert failed.json() == INTERNAL
        assert log_line(sim, r"ERROR .*\[serving\.py:173\] Request chatcmpl-\w+ failed with an internal")
        stream = Stream(sim, {"messages": [{"role": "user", "content": "hi"}]}).start()
        events = stream.finish()
        assert json.loads(events[0])["choices"][0]["delta"]["role"] == "assistant"
        assert json.loads(events[1]) == failed.json() and events[2:] == ["[DONE]"]
        text = requests.post(sim.url + "/v1/completions", json={"prompt": "hi"}, timeout=10)
        assert text.status_code == 500 and text.json() == failed.json()
        assert health(sim) == 200
        assert requests.get(sim.url + "/v1/models", timeout=10).status_code == 200
        assert metric(sim, "vllm:request_success_total", 'finished_reason="error"') == 3
        assert metric(sim, "vllm:request_success_total", 'finished_reason="stop"') == 1


def engine_rss_mib(sim_engine: psutil.Process) -> float:
    rss_bytes: int = sim_engine.memory_info().rss
    return rss_bytes / 2**20


def wait_rss(engine: psutil.Process, at_least_mib: float, timeout_s: float = 20.0) -> float:
    deadline = time.monotonic() + timeout_s
    while (rss := engine_rss_mib(engine)) < at_least_mib:
        assert time.monotonic() < deadline, f"engine RSS {rss:.0f} MiB, wanted {at_least_mib:.0f}"
        time.sleep(0.05)
    return rss


def test_host_pressure_fills_real_memory_up_to_its_ceiling() -> None:
    """Real, touched RAM in the engine core: RSS (what psutil's `available` loses) ends 192 MiB
    above a plain engine's, and stays there."""
    with running_sim(speed=50) as plain:
        base = engine_rss_mib(engine_core(plain))
    with running_sim(["--sim-host-pressure-mib", "192", "--sim-host-pressure-s", "0.5"], speed=50) as sim:
        engine = engine_core(sim)
        wait_rss(engine, base + 180)
        assert answer(sim, "hi")  # the engine keeps serving while its memory grows
        time.sleep(0.3)  # the ceiling holds: no growth past it
        assert engine_rss_mib(engine) < base + 192 + 40


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sim-host-pressure-mib", "9000"], "argument --sim-host-pressure-mib: must be 0..8192, not 9000"),
        (["--sim-hang-after-requests", "-1"], "argument --sim-hang-after-requests: must be >= 0, not -1"),
        (["--sim-host-pressure-s", "0"], "argument --sim-host-pressure-s: must be > 0, not 0.0"),
    ],
)
def test_fault_values_no_run_could_honour_are_refused_like_a_bad_flag(args: list[str], message: str) -> None:
    sim = start_sim(args)
    try:
        assert sim.proc.wait(20) == 2
        text = sim.drained()
        assert f"vllm: error: {message}" in text and "EngineCore" not in text
    finally:
        kill_group(sim)


def test_a_leak_keeps_growing_while_the_engine_core_is_stalled() -> None:
    args = ["--sim-leak-mib-per-min", "6000", "--sim-stall-after-tokens", "5"]
    with running_sim(args, speed=50) as sim:
        stream = Stream(sim, LONG).start()
        stream.wait_events(2)
        engine = engine_core(sim)
        rss = engine_rss_mib(engine)
        wait_rss(engine, rss + 50)  # 100 MiB/s of leak, engine wedged
        assert metric(sim, RUNNING) == 1 and not stream.done.is_set()


@pytest.mark.parametrize("version", ["0.33", "0.26"])
def test_a_sigterm_to_the_api_server_ends_a_wedged_engine_core_too(version: str) -> None:
    with running_sim(["--sim-hang-after-requests", "0", "--sim-vllm-version", version], speed=50) as sim:
        engine = engine_core(sim)
        stream = Stream(sim, LONG).start()
        stream.wait_head()
        sim.proc.send_signal(signal.SIGTERM)
        assert sim.proc.wait(30) == 0
        assert "force killing remaining processes count=1" in sim.drained()
        assert wait_gone([engine], 10.0) == []


def test_a_sigkilled_engine_core_gives_503_then_exit_0_at_the_watchdogs_look() -> None:
    """0.26.0 on the H200: /health 503 at once, the MPClient cleanup and EngineDeadError in the log
    (never the signal), `vllm serve` gone with code 0 within one watchdog period."""
    with running_sim(["--sim-vllm-version", "0.26", "--sim-watchdog-s", "20"], speed=10) as sim:
        engine = engine_core(sim)
        engine.send_signal(signal.SIGKILL)
        assert log_line(sim, r"WARNING .*\[core_client\.py:702\] \[shutdown\] MPClient: engine core exited")
        assert health(sim) == 503
        assert sim.proc.wait(30) == 0  # the watchdog looks every 2 s here (20 / speed 10)
        text = sim.drained()
        assert "EngineDeadError: EngineCore encountered an issue." in text
        assert "SIGKILL" not in text and "EngineCore encountered a fatal error." not in text
