"""The serving watch's readers, on vLLM 0.26.0's recorded /metrics and completion bodies."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from gates.canary import Answer, judge_completion
from gates.context import HttpReply
from gates.leak_rule import LeakRule
from launcher.watch import probes
from launcher.watch.verdict import Check, Kind

RECORDED = Path(__file__).resolve().parent.parent / "data" / "real-vllm-0.26" / "eager"
GIB = 1 << 30


def test_the_recorded_metrics_give_running_tokens_and_request_counts() -> None:
    before = probes.read_metrics((RECORDED / "metrics-before.txt").read_text(), 0.0)
    after = probes.read_metrics((RECORDED / "metrics-after.txt").read_text(), 5.0)
    assert after.running == 0.0
    assert after.generated == 716.0
    assert after.requests > before.requests and after.errors == 0
    assert probes.traffic_observation(before, after).kind is Kind.OK


def test_the_recorded_completion_is_a_healthy_canary_answer() -> None:
    answer = judge_completion(200, (RECORDED / "completions.json").read_text(), 0.05)
    assert answer.answer is Answer.OK and answer.detail == "8 tokens"
    assert judge_completion(500, '{"error": {"message": "boom"}}', 0.01).answer is Answer.ERROR
    assert judge_completion(200, '{"choices": []}', 0.01).answer is Answer.ERROR


def metrics(running: float, generated: float, requests: int = 0, errors: int = 0) -> str:
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}',
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}',
        "# TYPE http_requests_total counter",
        f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx"}} {requests - errors}',
        f'http_requests_total{{handler="/v1/completions",method="POST",status="5xx"}} {errors}',
    ]
    return "\n".join(lines) + "\n"


def test_decode_with_requests_running_and_a_frozen_counter_stalls_only_after_the_deadline() -> None:
    progress = probes.DecodeProgress(stall_s=10.0)
    assert progress.observe(probes.read_metrics(metrics(2, 100), 0.0)).kind is Kind.PROGRESS
    moved = progress.observe(probes.read_metrics(metrics(2, 140), 5.0))
    assert moved.kind is Kind.PROGRESS and moved.figures["tokens_moved"] is True
    assert progress.observe(probes.read_metrics(metrics(2, 140), 10.0)).kind is Kind.PROGRESS
    stalled = progress.observe(probes.read_metrics(metrics(2, 140), 15.5))
    assert stalled.kind is Kind.STALLED and "frozen at 140" in stalled.detail
    assert progress.observe(probes.read_metrics(metrics(2, 141), 20.0)).kind is Kind.PROGRESS


def test_nothing_running_is_never_a_stall() -> None:
    progress = probes.DecodeProgress(stall_s=1.0)
    for at in (0.0, 5.0, 10.0):
        assert progress.observe(probes.read_metrics(metrics(0, 100), at)).kind is Kind.PROGRESS


def test_mostly_5xx_needs_enough_requests() -> None:
    start = probes.read_metrics(metrics(0, 0, requests=0, errors=0), 0.0)
    few = probes.read_metrics(metrics(0, 0, requests=4, errors=4), 5.0)
    many = probes.read_metrics(metrics(0, 0, requests=40, errors=30), 5.0)
    assert probes.traffic_observation(start, few).kind is Kind.OK
    result = probes.traffic_observation(start, many)
    assert result.kind is Kind.MOSTLY_5XX and "30 of 40" in result.detail


def test_stopped_and_zombie_processes_at_once_and_d_only_when_long() -> None:
    states = {1: psutil.STATUS_RUNNING, 2: psutil.STATUS_DISK_SLEEP}
    watch = probes.ProcessStates(("VLLM",), long_d_s=10.0, state_of=states.get)
    assert watch.observe([1, 2], 0.0).kind is Kind.OK
    assert watch.observe([1, 2], 9.0).kind is Kind.OK
    long_d = watch.observe([1, 2], 10.5)
    assert long_d.kind is Kind.BAD_PROCESS and "in state D for 10 s" in long_d.detail
    states[2] = psutil.STATUS_RUNNING
    assert watch.observe([1, 2], 11.0).kind is Kind.OK
    states[1] = psutil.STATUS_STOPPED
    stopped = watch.observe([1, 2], 12.0)
    assert stopped.kind is Kind.BAD_PROCESS and "is stopped (state T)" in stopped.detail


def test_a_real_stopped_process_is_named_by_its_pid(tmp_path: Path) -> None:
    import signal
    import subprocess

    child = subprocess.Popen(["sleep", "30"])
    try:
        child.send_signal(signal.SIGSTOP)
        # The kernel stops it asynchronously: wait for the stop itself (a spin lost the race on a busy host).
        _, how = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(how)
        found = probes.ProcessStates(("VLLM",), long_d_s=10.0).observe([child.pid], 0.0)
        assert found.kind is Kind.BAD_PROCESS
        assert f"pid {child.pid} is stopped (state T)" in found.detail
    finally:
        child.kill()
        child.wait()


def test_host_memory_under_the_preflight_limits() -> None:
    fine = probes.host_memory_observation(8 * GIB, 0, 2.0, None, 0.0)
    assert fine.kind is Kind.OK and fine.check is Check.HOST_MEMORY
    low = probes.host_memory_observation(GIB // 2, 0, 2.0, None, 0.0)
    assert low.kind is Kind.LOW_MEMORY and "0.50 GiB available < 2 GiB" in low.detail
    swapping = probes.host_memory_observation(8 * GIB, 3 * GIB, 2.0, 1.0, 0.0)
    assert swapping.kind is Kind.LOW_MEMORY and "swap" in swapping.detail


def test_the_leak_rule_window_by_window() -> None:
    windows = probes.LeakWindows(LeakRule(baseline_window=2, consecutive=3, min_growth_mib=1024))
    mib = 1 << 20
    series = [4000, 4200, 4200, 4300, 4400, 4500]  # warm-up, then growth under 1 GiB: no leak
    assert all(windows.observe(v * mib, "resident memory", i).kind is Kind.OK for i, v in enumerate(series))
    for i, v in enumerate((5000, 5600, 6200)):
        last = windows.observe(v * mib, "resident memory", 10 + i)
    assert last.kind is Kind.LEAK and last.detail.startswith("resident memory")


def test_health_observations() -> None:
    assert probes.health_observation(HttpReply(200, ""), 1.0, 0.002, 10.0).kind is Kind.OK
    slow = probes.health_observation(HttpReply(0, "", "ReadTimeout", timed_out=True), 11.0, 10.0, 10.0)
    assert slow.kind is Kind.TIMEOUT and slow.waited_s == 10.0
    dead = probes.health_observation(HttpReply(503, ""), 1.0, 0.01, 10.0)
    assert dead.kind is Kind.ERROR and "503" in dead.detail
