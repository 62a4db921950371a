"""The serving watch's readers, on vLLM 0.26.0's recorded /metrics and completion bodies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from gates.canary import Answer, CanaryAnswer, judge_completion
from gates.context import HttpReply
from gates.leak_rule import LeakRule
from launcher.watch import probes
from launcher.watch.verdict import Check, Judge, Kind, Rules, Verdict

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


def metrics(
    running: float, generated: float, requests: int = 0, errors: int = 0, kv: float = 0.0, prompt: float = 0.0
) -> str:
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}',
        "# TYPE vllm:prompt_tokens_total counter",
        f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}',
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}',
        "# TYPE http_requests_total counter",
        f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx"}} {requests - errors}',
        f'http_requests_total{{handler="/v1/completions",method="POST",status="5xx"}} {errors}',
    ]
    return "\n".join(lines) + "\n"


def test_requests_running_and_nothing_moving_stalls_only_after_stall_s() -> None:
    progress = probes.EngineProgress(stall_s=3.0)
    assert progress.observe(probes.read_metrics(metrics(2, 100), 0.0)).kind is Kind.PROGRESS
    moved = progress.observe(probes.read_metrics(metrics(2, 140), 1.0))
    assert moved.kind is Kind.PROGRESS and moved.figures["moved_since"] == 0.0
    assert progress.observe(probes.read_metrics(metrics(2, 140), 3.9)).kind is Kind.PROGRESS
    stalled = progress.observe(probes.read_metrics(metrics(2, 140), 4.0))
    assert stalled.kind is Kind.STALLED and stalled.figures["frozen_s"] == 3.0
    assert stalled.detail == (
        "2 requests running, 0 waiting, and nothing vLLM publishes moved for 3.0 s "
        "(tokens, KV-cache usage, requests)"
    )
    assert progress.observe(probes.read_metrics(metrics(2, 141), 5.0)).kind is Kind.PROGRESS


def test_nothing_running_is_never_a_stall() -> None:
    progress = probes.EngineProgress(stall_s=1.0)
    for at in (0.0, 5.0, 10.0):
        assert progress.observe(probes.read_metrics(metrics(0, 100), at)).kind is Kind.PROGRESS


def test_a_chunked_prefill_moves_only_the_kv_usage_and_that_is_progress() -> None:
    """vLLM counts prompt tokens with the first output (vllm-facts.md §13): a long prefill moves no
    token counter, but every chunk's step allocates KV blocks."""
    progress = probes.EngineProgress(stall_s=3.0)
    said = [
        progress.observe(probes.read_metrics(metrics(1, 500, kv=kv, prompt=900), at)).kind
        for at, kv in [(0.0, 0.01), (2.0, 0.02), (4.0, 0.03), (6.0, 0.04), (8.0, 0.05)]
    ]
    assert said == [Kind.PROGRESS] * 5


def test_a_prefill_whose_steps_come_slower_than_stall_s_gets_twice_its_pace() -> None:
    progress = probes.EngineProgress(stall_s=3.0)
    assert progress.observe(probes.read_metrics(metrics(0, 0), 0.0)).figures.get("moved_since") is None
    progress.observe(probes.read_metrics(metrics(1, 0, kv=0.1), 1.0))  # a first chunk: paced 1 s
    paced = progress.observe(probes.read_metrics(metrics(1, 0, kv=0.2), 5.0))  # the next took up to 4 s
    assert paced.kind is Kind.PROGRESS
    waiting = progress.observe(probes.read_metrics(metrics(1, 0, kv=0.2), 12.9))
    assert (waiting.kind, waiting.figures["allowed_s"]) == (Kind.PROGRESS, 8.0)
    assert progress.observe(probes.read_metrics(metrics(1, 0, kv=0.2), 13.0)).kind is Kind.STALLED


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


# ---- /metrics as recorded: what the watch reads of a whole page ------------------------------------
BENCH = Path(__file__).resolve().parent.parent / "data" / "bench"
CHAT_2XX = 'http_requests_total{handler="/v1/chat/completions",method="POST",status="2xx"} 53.0'


def page(name: str) -> str:
    return (BENCH / name).read_text(encoding="utf-8")


def test_a_fresh_page_has_the_counters_at_zero_and_no_request_yet() -> None:
    fresh = probes.read_metrics(page("vllm-0.26.0-metrics-fresh.txt"), 0.0)
    assert (fresh.running, fresh.generated, fresh.requests, fresh.errors) == (0.0, 0.0, 0, 0)


def test_client_errors_are_requests_but_never_5xx() -> None:
    """The recorded bench page: 53 chats answered, 44 refused with 4xx, /v1/models asked twice."""
    fresh = probes.read_metrics(page("vllm-0.26.0-metrics-fresh.txt"), 0.0)
    after = probes.read_metrics(page("vllm-0.26.0-metrics-after.txt"), 5.0)
    assert (after.generated, after.requests, after.errors) == (2370.0, 99, 0)
    traffic = probes.traffic_observation(fresh, after)
    assert (traffic.kind, traffic.detail, traffic.figures) == (
        Kind.OK,
        "0 of 99 requests 5xx",
        {"requests": 99, "errors_5xx": 0},
    )


def test_the_same_page_with_its_chats_answered_5xx_is_mostly_5xx() -> None:
    fresh = probes.read_metrics(page("vllm-0.26.0-metrics-fresh.txt"), 0.0)
    text = page("vllm-0.26.0-metrics-after.txt")
    assert CHAT_2XX in text
    after = probes.read_metrics(text.replace(CHAT_2XX, CHAT_2XX.replace("2xx", "5xx")), 5.0)
    assert (after.requests, after.errors) == (99, 53)
    traffic = probes.traffic_observation(fresh, after)
    assert (traffic.kind, traffic.detail) == (Kind.MOSTLY_5XX, "53 of 99 requests answered 5xx in 5 s")


def test_two_engines_figures_are_added_up() -> None:
    """Data parallel: every engine publishes its own series, labelled engine="N"."""
    text = page("vllm-0.26.0-metrics-after.txt")
    second = [
        'vllm:num_requests_running{engine="1",model_name="tiny"} 3.0',
        'vllm:generation_tokens_total{engine="1",model_name="tiny"} 630.0',
    ]
    reading = probes.read_metrics(text + "\n".join(second) + "\n", 1.0)
    assert (reading.running, reading.generated) == (3.0, 3000.0)


def test_lines_of_other_families_are_never_parsed_but_a_broken_wanted_line_spoils_the_reading() -> None:
    text = page("vllm-0.26.0-metrics-after.txt")
    other = probes.read_metrics(text + "vllm:cache_config_info{ this is not exposition\n", 1.0)
    assert (other.generated, other.requests) == (2370.0, 99)
    broken = probes.read_metrics(text + 'vllm:num_requests_running{engine="1"} lots\n', 1.0)
    assert (broken.running, broken.generated, broken.requests, broken.errors) == (None, None, 0, 0)
    said = probes.EngineProgress(stall_s=1.0).observe(broken)
    assert (said.kind, said.detail) == (
        Kind.PROGRESS,
        "no engine figures in /metrics",
    )  # no stall from no data


def test_a_nan_sample_is_left_out_of_the_sum() -> None:
    text = metrics(2, 100) + 'vllm:num_requests_running{engine="1",model_name="m"} NaN\n'
    assert probes.read_metrics(text, 0.0).running == 2.0
    only_nan = 'vllm:num_requests_running{engine="0",model_name="m"} NaN\n'
    assert probes.read_metrics(only_nan, 0.0).running is None


# ---- the 5xx share: at and around its two thresholds ----------------------------------------------
@pytest.mark.parametrize(
    ("requests", "errors", "kind"),
    [
        (9, 9, Kind.OK),  # every one failed, but fewer than MIN_REQUESTS_FOR_SHARE say nothing
        (10, 5, Kind.OK),  # half is not most
        (10, 6, Kind.MOSTLY_5XX),
        (11, 6, Kind.MOSTLY_5XX),
        (100, 50, Kind.OK),
        (100, 51, Kind.MOSTLY_5XX),
        (0, 0, Kind.OK),
    ],
)
def test_mostly_5xx_is_over_half_of_at_least_ten_requests(requests: int, errors: int, kind: Kind) -> None:
    assert probes.MIN_REQUESTS_FOR_SHARE == 10 and probes.MOSTLY == 0.5
    before = probes.read_metrics(metrics(0, 0, requests=1000, errors=100), 0.0)
    after = probes.read_metrics(metrics(0, 0, requests=1000 + requests, errors=100 + errors), 5.0)
    found = probes.traffic_observation(before, after)
    assert found.kind is kind and found.figures == {"requests": requests, "errors_5xx": errors}


def test_counters_that_went_back_after_a_restart_are_no_failing_window() -> None:
    before = probes.read_metrics(metrics(0, 0, requests=500, errors=400), 0.0)
    after = probes.read_metrics(metrics(0, 0, requests=20, errors=20), 5.0)
    found = probes.traffic_observation(before, after)
    assert found.kind is Kind.OK and found.figures == {"requests": -480, "errors_5xx": -380}


# ---- engine progress: where a frozen run starts and ends ------------------------------------------
def reading(at: float, running: float, generated: float | None) -> probes.MetricsReading:
    stepped = () if generated is None else (running, 0.0, 0.0, 0.0, generated, None, None)
    return probes.MetricsReading(at, running, generated, 0, 0, 0.0, stepped)


def test_the_first_reading_starts_a_frozen_run_since_nothing_says_when_it_last_moved() -> None:
    progress = probes.EngineProgress(stall_s=10.0)
    first = progress.observe(reading(0.0, 4, 900))
    assert (first.detail, first.figures) == (
        "engine idle",
        {"running": 4, "waiting": 0.0, "generation_tokens": 900},
    )
    assert progress.observe(reading(9.9, 4, 900)).kind is Kind.PROGRESS
    assert progress.observe(reading(10.0, 4, 900)).kind is Kind.STALLED


def test_a_frozen_run_after_an_idle_reading_starts_at_the_first_move() -> None:
    """Idle readings mark that nothing was owed; the gap from one to the first move is the reading
    cadence, not a step, so it sets no pace."""
    progress = probes.EngineProgress(stall_s=10.0)
    assert progress.observe(reading(0.0, 0, 500)).kind is Kind.PROGRESS  # idle: no run
    busy = progress.observe(reading(5.0, 3, 500))  # busy now (the gauge moved), from 0
    assert busy.figures["moved_since"] == 0.0
    assert progress.observe(reading(14.0, 3, 500)).kind is Kind.PROGRESS
    stalled = progress.observe(reading(15.0, 3, 500))  # stall_s from the move at 5 s
    assert (stalled.kind, stalled.figures["allowed_s"]) == (Kind.STALLED, 10.0)
    fast = probes.EngineProgress(stall_s=3.0)
    fast.observe(reading(0.0, 0, 500))
    assert fast.observe(reading(5.0, 4, 700)).figures["allowed_s"] == 3.0  # 5 s since idle: no pace
    assert fast.observe(reading(8.0, 4, 700)).kind is Kind.STALLED


def test_movement_ends_a_stall_and_the_next_run_is_measured_from_the_move() -> None:
    """The reading before the move saw no move, so the next run has stall_s again."""
    progress = probes.EngineProgress(stall_s=3.0)
    kinds = [
        progress.observe(reading(at, 2, generated)).kind
        for at, generated in [(0.0, 100), (3.0, 100), (4.0, 130), (6.9, 130), (7.0, 130)]
    ]
    assert kinds == [Kind.PROGRESS, Kind.STALLED, Kind.PROGRESS, Kind.PROGRESS, Kind.STALLED]


def test_a_counter_that_went_back_is_movement_not_a_stall() -> None:
    """A restarted engine core counts from 0 again: its figures changed, so it stepped."""
    progress = probes.EngineProgress(stall_s=3.0)
    progress.observe(reading(0.0, 2, 5000))
    assert progress.observe(reading(1.0, 2, 40)).figures["moved_since"] == 0.0
    assert progress.observe(reading(3.9, 2, 40)).kind is Kind.PROGRESS  # 2.9 s since the move
    assert progress.observe(reading(4.0, 2, 40)).kind is Kind.STALLED


def test_a_page_without_engine_figures_forgets_the_frozen_run() -> None:
    progress = probes.EngineProgress(stall_s=3.0)
    progress.observe(reading(0.0, 2, 100))
    assert progress.observe(reading(2.0, 2, None)).detail == "no engine figures in /metrics"
    assert progress.observe(reading(4.0, 2, 100)).detail == "engine idle"  # a new run from here
    assert progress.observe(reading(6.9, 2, 100)).kind is Kind.PROGRESS
    assert progress.observe(reading(7.0, 2, 100)).kind is Kind.STALLED


def test_a_hang_under_a_full_batch_through_the_judge() -> None:
    """Tokens flow each second (a queued canary is excused), then freeze: wedged once the freeze
    lasts stall_s, without waiting for any canary's deadline."""
    progress = probes.EngineProgress(stall_s=3.0)
    judge = Judge(Rules())
    canary = CanaryAnswer(Answer.TIMEOUT, 0, 5.0, "no answer within 5 s")
    seen = []
    readings: list[tuple[float, int | None]] = [(0.0, 1000), (1.0, 1040), (2.0, 1080), (3.0, 1120)]
    readings += [(5.0, 1160), (5.5, None), (6.0, 1200), (7.0, 1200), (8.0, 1200), (9.0, 1200)]
    for at, generated in readings:  # None: a canary sent at 0.5 s passed its deadline
        if generated is None:
            judge.observe(probes.canary_observation(canary, at, 5.0))
        else:
            judge.observe(progress.observe(probes.read_metrics(metrics(8, generated), at)))
        seen.append(judge.judgement().verdict)
    assert seen[:9] == [Verdict.SERVING] * 9  # the canary waited behind moving tokens; 2 s frozen at 8
    assert seen[9] is Verdict.WEDGED  # frozen since 6 s: 3 s at 9 s
    assert "nothing vLLM publishes moved for 3.0 s" in judge.judgement().detail


# ---- process states with a scripted state_of -----------------------------------------------------
GONE = 5_000_001  # above Linux's largest pid (2**22): never a process, so named by its pid alone
OTHER = 5_000_002


def scripted(states: dict[int, str | None]) -> probes.ProcessStates:
    return probes.ProcessStates(("VLLM",), long_d_s=10.0, state_of=lambda pid: states.get(pid))


def test_d_is_bad_once_it_lasted_exactly_long_d_s() -> None:
    watch = scripted({GONE: psutil.STATUS_DISK_SLEEP})
    assert watch.observe([GONE], 100.0).kind is Kind.OK
    assert watch.observe([GONE], 109.99).kind is Kind.OK
    at_limit = watch.observe([GONE], 110.0)
    assert (at_limit.kind, at_limit.detail) == (Kind.BAD_PROCESS, f"pid {GONE} is in state D for 10 s")


def test_d_that_was_interrupted_starts_its_count_again() -> None:
    states: dict[int, str | None] = {GONE: psutil.STATUS_DISK_SLEEP}
    watch = scripted(states)
    watch.observe([GONE], 0.0)
    states[GONE] = psutil.STATUS_RUNNING
    watch.observe([GONE], 5.0)
    states[GONE] = psutil.STATUS_DISK_SLEEP
    assert watch.observe([GONE], 6.0).kind is Kind.OK
    assert watch.observe([GONE], 15.0).kind is Kind.OK  # 9 s in D since 6, not 15 since 0
    assert watch.observe([GONE], 16.0).kind is Kind.BAD_PROCESS


def test_a_pid_that_vanished_is_not_counted_and_its_d_time_is_forgotten() -> None:
    states: dict[int, str | None] = {GONE: psutil.STATUS_DISK_SLEEP, OTHER: psutil.STATUS_SLEEPING}
    watch = scripted(states)
    watch.observe([GONE, OTHER], 0.0)
    states[GONE] = None  # gone between the listing and the read
    gone = watch.observe([GONE, OTHER], 5.0)
    assert (gone.kind, gone.detail, gone.figures) == (
        Kind.OK,
        "1 processes running",
        {"states": {OTHER: psutil.STATUS_SLEEPING}},
    )
    states[GONE] = psutil.STATUS_DISK_SLEEP  # the pid is used again
    assert watch.observe([GONE, OTHER], 12.0).kind is Kind.OK  # 0 s in D, not 12


def test_each_pid_in_d_has_its_own_count() -> None:
    watch = scripted({GONE: psutil.STATUS_DISK_SLEEP, OTHER: psutil.STATUS_DISK_SLEEP})
    watch.observe([GONE], 0.0)
    watch.observe([GONE, OTHER], 5.0)
    found = watch.observe([GONE, OTHER], 10.0)
    assert found.detail == f"pid {GONE} is in state D for 10 s"
    both = watch.observe([GONE, OTHER], 15.0)
    assert both.detail == f"pid {GONE} is in state D for 15 s; pid {OTHER} is in state D for 10 s"


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (psutil.STATUS_ZOMBIE, "is a zombie (state Z)"),
        (psutil.STATUS_TRACING_STOP, "is stopped (state t)"),
        (psutil.STATUS_STOPPED, "is stopped (state T)"),
    ],
)
def test_stopped_and_zombie_processes_are_bad_at_the_first_look(state: str, said: str) -> None:
    found = scripted({GONE: state, OTHER: psutil.STATUS_RUNNING}).observe([OTHER, GONE], 0.0)
    assert (found.kind, found.detail) == (Kind.BAD_PROCESS, f"pid {GONE} {said}")
    assert found.figures == {"states": {OTHER: psutil.STATUS_RUNNING, GONE: state}}


@pytest.mark.parametrize("state", [psutil.STATUS_SLEEPING, psutil.STATUS_IDLE, psutil.STATUS_RUNNING])
def test_sleeping_idle_and_running_processes_are_fine_however_long(state: str) -> None:
    watch = scripted({GONE: state})
    assert all(watch.observe([GONE], at).kind is Kind.OK for at in (0.0, 100.0, 10_000.0))


WAITING = "import sys, time; print('ready', flush=True); time.sleep(60)"


def started(argv: list[str], children: list[subprocess.Popen[str]], cwd: Path) -> None:
    """A real child whose argv[0] is the title it shows (setproctitle does the same for vLLM); kept in
    `children` before it is waited for, so the test ends it whatever happens."""
    child = subprocess.Popen(argv, executable=sys.executable, stdout=subprocess.PIPE, text=True, cwd=cwd)
    children.append(child)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"


def test_a_process_is_named_by_its_vllm_title_else_as_the_api_server_else_by_its_command(
    tmp_path: Path,
) -> None:
    (tmp_path / "serve").write_text(WAITING)
    children: list[subprocess.Popen[str]] = []
    try:
        for argv in (["VLLM::EngineCore", "-c", WAITING], ["vllm", "serve"], ["trainer", "-c", WAITING]):
            started(argv, children, cwd=tmp_path)
        core, api, other = (child.pid for child in children)
        assert probes.process_name(core, ("VLLM",)) == f"VLLM::EngineCore pid {core}"
        assert probes.process_name(api, ("VLLM",)) == f"API server pid {api}"
        assert probes.process_name(other, ("VLLM",)).startswith("trainer -c import sys")
        assert probes.process_name(GONE, ("VLLM",)) == f"pid {GONE}"
        states = {core: psutil.STATUS_STOPPED}
        found = probes.ProcessStates(("VLLM",), 10.0, state_of=states.get).observe([core], 0.0)
        assert found.detail == f"VLLM::EngineCore pid {core} is stopped (state T)"
    finally:
        for child in children:
            child.kill()
            child.wait()
            assert child.stdout is not None
            child.stdout.close()


# ---- host memory and the group's memory -----------------------------------------------------------
def test_host_ram_at_exactly_the_limit_is_fine_and_swap_at_exactly_its_limit_too() -> None:
    at_ram_limit = probes.host_memory_observation(2 * GIB, 0, 2.0, None, 0.0)
    assert at_ram_limit.kind is Kind.OK
    assert at_ram_limit.figures == {"available_gib": 2.0, "swap_used_gib": 0.0}
    assert probes.host_memory_observation(2 * GIB - 1, 0, 2.0, None, 0.0).kind is Kind.LOW_MEMORY
    assert probes.host_memory_observation(8 * GIB, GIB, 2.0, 1.0, 0.0).kind is Kind.OK
    assert probes.host_memory_observation(8 * GIB, GIB + (1 << 20), 2.0, 1.0, 0.0).kind is Kind.LOW_MEMORY


def test_swap_is_not_judged_without_a_limit_and_both_problems_are_named_together() -> None:
    assert probes.host_memory_observation(8 * GIB, 100 * GIB, 2.0, None, 0.0).kind is Kind.OK
    both = probes.host_memory_observation(GIB, 3 * GIB, 2.0, 1.0, 7.0)
    assert both.kind is Kind.LOW_MEMORY and both.at == 7.0
    ram, swap = both.detail.split("; ")
    assert ram.startswith("host RAM: 1.00 GiB available < 2 GiB") and swap.startswith(
        "swap: 3.00 GiB in use > 1"
    )


MIB = 1 << 20


def test_the_leak_windows_judge_nothing_before_the_rule_has_its_windows() -> None:
    windows = probes.LeakWindows(LeakRule(baseline_window=2, consecutive=3, min_growth_mib=1024))
    early = [windows.observe(v * MIB, "GPU memory (NVML)", i) for i, v in enumerate((1000, 3000, 5000, 7000))]
    assert all(one.kind is Kind.OK for one in early)
    assert early[-1].detail == "GPU memory (NVML): 4 windows measured; the rule needs 5"
    leak = windows.observe(9000 * MIB, "GPU memory (NVML)", 4)
    assert leak.kind is Kind.LEAK and leak.figures["series_mib"] == [1000, 3000, 5000, 7000, 9000]


def test_the_leak_windows_slide_so_a_steady_leak_is_judged_over_the_last_eight() -> None:
    """windows_needed + 3 = 8 windows are judged, baselined at their second: a steady leak of
    200 MiB a window is called at the 8th (6 × 200 > 1024), one of 170 never is (6 × 170 < 1024)."""
    rule = LeakRule(baseline_window=2, consecutive=3, min_growth_mib=1024)
    steady = probes.LeakWindows(rule)
    kinds = [steady.observe((4000 + 200 * i) * MIB, "resident memory", i).kind for i in range(8)]
    assert kinds == [Kind.OK] * 7 + [Kind.LEAK]
    slow = probes.LeakWindows(rule)
    assert all(slow.observe((4000 + 170 * i) * MIB, "resident memory", i).kind is Kind.OK for i in range(200))
    assert len(slow.series) == rule.windows_needed * 4  # and only so much is kept


def test_the_groups_memory_is_nvmls_where_it_answers_else_the_resident_memory_of_live_pids() -> None:
    me = os.getpid()
    assert probes.group_memory([me], lambda pids: 7 * GIB) == (7 * GIB, "GPU memory (NVML)")
    rss, source = probes.group_memory([me, GONE], lambda pids: None)
    assert source == "resident memory" and rss > 0  # this process's own, the gone pid adds nothing
    assert probes.group_memory([GONE], None) == (0, "resident memory")


def test_a_process_stopped_by_a_signal_for_halt_s_halts_the_engine_a_tracing_stop_never_does() -> None:
    states: dict[int, str | None] = {GONE: psutil.STATUS_STOPPED, OTHER: psutil.STATUS_TRACING_STOP}
    watch = probes.ProcessStates(("VLLM",), long_d_s=10.0, state_of=lambda pid: states.get(pid), halt_s=3.0)
    assert watch.observe([GONE, OTHER], 0.0).kind is Kind.BAD_PROCESS
    assert watch.observe([GONE, OTHER], 2.9).kind is Kind.BAD_PROCESS
    halted = watch.observe([GONE, OTHER], 3.0)
    assert halted.kind is Kind.HALTED
    assert halted.detail == f"pid {GONE} stopped (state T) for 3.0 s: the engine cannot step"
    states[GONE] = psutil.STATUS_RUNNING
    assert watch.observe([GONE, OTHER], 4.0).kind is Kind.BAD_PROCESS  # the debugger's stop: degraded
    states[GONE] = psutil.STATUS_STOPPED
    assert watch.observe([GONE, OTHER], 5.0).kind is Kind.BAD_PROCESS  # stopped again: counted anew
    assert watch.observe([GONE, OTHER], 8.0).kind is Kind.HALTED
    states[OTHER] = psutil.STATUS_TRACING_STOP
    assert probes.ProcessStates(("VLLM",), 10.0, lambda pid: states.get(pid)).observe([GONE], 99.0).kind is (
        Kind.BAD_PROCESS
    )  # no halt_s: never halted


TOOLS_400 = (
    '{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
    '--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}'
)


def test_vllms_400_for_tool_calls_it_was_not_started_for_is_the_profiles_not_a_sickness() -> None:
    found = probes.tool_calls_unconfigured(400, TOOLS_400, 1.0, "weather")
    assert found is not None and (found.check, found.kind, found.ok) == (
        Check.TOOL_CALL,
        Kind.UNCONFIGURED,
        True,
    )
    assert "the server does not do tool calls" in found.detail and "weather" in found.detail
    assert probes.tool_calls_unconfigured(400, '{"error": {"message": "bad schema"}}', 1.0, "weather") is None
    assert probes.tool_calls_unconfigured(500, TOOLS_400, 1.0, "weather") is None
