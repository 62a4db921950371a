"""The serving watch's verdict timings on a virtual clock (tests/virtual_clock.py): the real runner's
two threads, a scripted server, and time that moves only when both wait — so "wedged after 36 s" is
an exact statement about the rules (docs/gates.md "Time to a verdict"), not a measurement.

The scripted server plays what vLLM 0.26 does when its engine core hangs (vllm-facts.md §8):
`/health` still answers 200 at once, `/metrics` shows the last figures the engine core sent, and a
completion gets no answer until the client's deadline.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gates.context import HttpReply
from gates.leak_rule import LeakRule
from launcher.profile.candidate import Candidate
from launcher.watch.runner import KEPT_OBSERVATIONS, MIN_CANARY_GAP_S, ServingWatch, WatchPlan
from launcher.watch.verdict import Check, Judgement, Kind, Observation, Rules, Verdict
from tests.doubles import FakeClock
from tests.supervisor_rig import Rig
from tests.virtual_clock import VirtualClock

COMPLETION = '{"choices": [{"text": " Paris"}], "usage": {"completion_tokens": 4}}'
PLENTY = (64 << 30, 0)  # host RAM available, swap used


@dataclass
class Engine:
    """The server as the watch sees it: `hung` (completions get no answer), `running` requests and
    the generation counter (`moving`: it grows at each read)."""

    clock: VirtualClock
    hung: bool = False
    running: int = 0
    moving: bool = False
    generated: int = 1000
    asked: list[str] = field(default_factory=list)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        self.asked.append(path)
        if path == "/metrics":
            if self.moving:
                self.generated += 50
            body = (
                f'vllm:num_requests_running{{model_name="m"}} {self.running}\n'
                f'vllm:generation_tokens_total{{model_name="m"}} {self.generated}\n'
            )
            return HttpReply(200, body)
        return HttpReply(200, "")  # /health: 200 while the engine core hangs

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        self.asked.append(path)
        if self.hung:
            self.clock.sleep(timeout_s)
            return HttpReply(0, "", "read timed out", timed_out=True)
        return HttpReply(200, COMPLETION)

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        return iter(())


class Verdicts:
    """Each change of judgement with the virtual time it came at; `final` once one is acted on."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.seen: list[tuple[float, Judgement]] = []
        self.final = threading.Event()

    def __call__(self, judgement: Judgement) -> None:
        self.seen.append((self.clock.monotonic(), judgement))
        if judgement.verdict.is_final:
            self.final.set()


def watch_of(
    tmp_path: Path, clock: VirtualClock, engine: Engine, **supervisor: object
) -> tuple[ServingWatch, Verdicts]:
    candidate: Candidate = Rig(tmp_path).candidate(supervisor={"canary_tool_call_every": 0, **supervisor})
    verdicts = Verdicts(clock)
    watch = ServingWatch(
        WatchPlan.of(candidate), lambda: [], verdicts, host=lambda: PLENTY, clock=clock, http=engine
    )
    return watch, verdicts


def run_until_final(
    watch: ServingWatch, verdicts: Verdicts, clock: VirtualClock, limit_s: float
) -> float | None:
    """Virtual seconds from the start to the first final verdict, or None within `limit_s`."""
    began = clock.monotonic()
    watch.start()
    try:
        clock.wait(verdicts.final, limit_s)
    finally:
        watch.stop()
    final = next((at for at, j in verdicts.seen if j.verdict.is_final), None)
    return None if final is None else final - began


def test_an_idle_hang_is_wedged_after_one_interval_a_deadline_and_half_a_deadline(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True)
    watch, verdicts = watch_of(tmp_path, clock, engine)
    after = run_until_final(watch, verdicts, clock, limit_s=600)
    assert after == 10 + 5 + 2.5  # the first canary at 10 s waits 5 s; the one sent at once, 2.5 s
    assert after <= 10 + 2 * 5 <= 20  # the bound docs/gates.md states: interval + 2 x timeout
    kinds = [j.verdict for _, j in verdicts.seen]
    assert kinds == [Verdict.DEGRADED, Verdict.WEDGED]  # the first miss is retried at once
    assert verdicts.seen[-1][1].detail == "canary: no answer within 2.5 s (2 in a row)"


def test_a_shorter_pace_calls_the_hang_sooner_by_the_same_rule(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True)
    watch, verdicts = watch_of(tmp_path, clock, engine, canary_interval_s=2, canary_timeout_s=3)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 2 + 3 + 1.5  # within 2 + 2 x 3


def test_a_stalled_engine_is_wedged_stall_s_after_the_first_reading_without_a_canary(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True, running=4)  # streams running, every figure frozen
    watch, verdicts = watch_of(tmp_path, clock, engine)
    after = run_until_final(watch, verdicts, clock, limit_s=600)
    # /metrics at the free pace (5 s) shows 4 running: read every second from then on, frozen
    # since 5 s, stalled at 8 s — before the first canary (10 s) was even sent.
    assert after == 5 + 3
    wedged = verdicts.seen[-1][1]
    assert (wedged.verdict, wedged.check) == (Verdict.WEDGED, Check.METRICS)
    assert wedged.detail.startswith("4 requests running, 0 waiting, and nothing vLLM publishes moved")


def test_a_canary_queued_behind_a_full_batch_is_no_miss(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True, running=4, moving=True)  # tokens flow; the canary only waits
    watch, verdicts = watch_of(tmp_path, clock, engine)
    assert run_until_final(watch, verdicts, clock, limit_s=300) is None
    assert all(j.verdict is Verdict.SERVING for _, j in verdicts.seen)
    assert engine.asked.count("/v1/completions") >= 10  # it kept asking all along


def test_a_healthy_server_is_asked_at_the_documented_pace(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock)
    watch, verdicts = watch_of(tmp_path, clock, engine)
    assert run_until_final(watch, verdicts, clock, limit_s=60) is None and verdicts.seen == []
    # 60 s: a canary every 10 s (at 10, 20, ... 60), /health and /metrics every 5 s (nothing runs)
    assert engine.asked.count("/v1/completions") in (5, 6)
    assert engine.asked.count("/health") in (11, 12) and engine.asked.count("/metrics") in (11, 12)


# ---- more timings: a server scripted by the virtual time ------------------------------------------
MIB = 1 << 20
CALL = {"function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
TOOL_CALL = json.dumps({"choices": [{"message": {"tool_calls": [CALL]}, "finish_reason": "tool_calls"}]})
TOOLS_400 = json.dumps(
    {
        "error": {
            "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            "type": "BadRequestError",
            "code": 400,
        }
    }
)
NO_TOOL_CALL = json.dumps({"choices": [{"message": {"content": "It is sunny."}, "finish_reason": "stop"}]})


@dataclass
class Timeline:
    """A server whose answers depend on the virtual time since `began`: completions hang from
    `hang_at` on and answer 500 from `errors_at` until `errors_until`; tool calls come back without a
    call until `tool_wrong_until`. Every request is kept with the time it came at."""

    clock: VirtualClock
    began: float = 1000.0
    hang_at: float = float("inf")
    errors_at: float = float("inf")
    errors_until: float = float("inf")
    tool_wrong_until: float = 0.0
    tools_unconfigured: bool = False  # chat completions with tools answer vLLM's 400
    generated: int = 0  # what /metrics counts: the canaries' own tokens
    asked: list[tuple[float, str]] = field(default_factory=list)

    def now(self) -> float:
        return self.clock.monotonic() - self.began

    def get(self, path: str, timeout_s: float) -> HttpReply:
        self.asked.append((self.now(), path))
        if path == "/metrics":
            return HttpReply(
                200,
                'vllm:num_requests_running{model_name="m"} 0\n'
                f'vllm:generation_tokens_total{{model_name="m"}} {self.generated}\n',
            )
        return HttpReply(200, "")

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        self.asked.append((self.now(), path))
        if self.now() >= self.hang_at:
            self.clock.sleep(timeout_s)
            return HttpReply(0, "", "read timed out", timed_out=True)
        if self.errors_at <= self.now() < self.errors_until:
            return HttpReply(500, '{"error": {"message": "EngineCore encountered an issue"}}')
        if path == "/v1/chat/completions":
            if self.tools_unconfigured:
                return HttpReply(400, TOOLS_400)
            return HttpReply(200, NO_TOOL_CALL if self.now() < self.tool_wrong_until else TOOL_CALL)
        self.generated += 4
        return HttpReply(200, COMPLETION)

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        return iter(())

    def posts(self) -> list[tuple[float, str]]:
        return [(at, path) for at, path in self.asked if path.startswith("/v1/")]


def watch_with(
    tmp_path: Path,
    clock: VirtualClock,
    server: Timeline,
    *,
    host: tuple[int, int] = PLENTY,
    gpu_bytes: Callable[[Sequence[int]], int | None] | None = None,
    notes: list[str] | None = None,
    **supervisor: object,
) -> tuple[ServingWatch, Verdicts]:
    candidate: Candidate = Rig(tmp_path).candidate(supervisor={"canary_tool_call_every": 0, **supervisor})
    verdicts = Verdicts(clock)
    watch = ServingWatch(
        WatchPlan.of(candidate),
        lambda: [],
        verdicts,
        on_note=None if notes is None else notes.append,
        host=lambda: host,
        gpu_bytes=gpu_bytes,
        clock=clock,
        http=server,
    )
    return watch, verdicts


def changes(verdicts: Verdicts) -> list[tuple[float, Verdict]]:
    return [(at - 1000.0, judgement.verdict) for at, judgement in verdicts.seen]


def test_error_answers_are_failing_one_retry_gap_after_the_first(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock, errors_at=0.0)
    watch, verdicts = watch_with(tmp_path, clock, server)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 10 + MIN_CANARY_GAP_S
    assert changes(verdicts) == [(10.0, Verdict.DEGRADED), (11.0, Verdict.FAILING)]
    assert verdicts.seen[-1][1].detail.startswith("canary: HTTP 500: ")


def test_a_hang_that_begins_after_healthy_canaries_is_wedged_by_the_next_two(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock, hang_at=45.0)
    watch, verdicts = watch_with(tmp_path, clock, server)
    after = run_until_final(watch, verdicts, clock, limit_s=600)
    # answered at 10 to 40; the canary of 50 s waits to 55, the one sent at once to 57.5
    assert after == 50 + 5 + 2.5
    assert [at for at, _ in server.posts() if at < 57.5] == [10.0, 20.0, 30.0, 40.0, 50.0, 55.0]
    assert changes(verdicts) == [(55.0, Verdict.DEGRADED), (57.5, Verdict.WEDGED)]


def test_one_error_is_retried_at_once_and_the_pace_follows_the_retry(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock, errors_at=5.0, errors_until=10.5)  # the canary of 10 s gets the one error
    watch, verdicts = watch_with(tmp_path, clock, server)
    assert run_until_final(watch, verdicts, clock, limit_s=60) is None
    assert changes(verdicts) == [(10.0, Verdict.DEGRADED), (11.0, Verdict.SERVING)]
    assert [at for at, _ in server.posts()] == [10.0, 11.0, 21.0, 31.0, 41.0, 51.0]  # due 10 s after the retry


def test_every_nth_canary_is_the_tool_call_and_a_wrong_one_stands_until_a_tool_call_passes(
    tmp_path: Path,
) -> None:
    """The retry after a wrong tool call is a plain canary (the 4th): it answers, which says nothing
    about tool calls, so only the next tool call (the 6th) clears the tool call's own failed check."""
    clock = VirtualClock(actors=3)
    server = Timeline(clock, tool_wrong_until=45.0)
    watch, verdicts = watch_with(tmp_path, clock, server, canary_tool_call_every=3)
    assert run_until_final(watch, verdicts, clock, limit_s=95) is None
    assert server.posts() == [
        (10.0, "/v1/completions"),
        (20.0, "/v1/completions"),
        (30.0, "/v1/chat/completions"),  # the 3rd
        (31.0, "/v1/completions"),  # its retry, one gap later: the 4th
        (41.0, "/v1/completions"),
        (51.0, "/v1/chat/completions"),  # the 6th
        (61.0, "/v1/completions"),
        (71.0, "/v1/completions"),
        (81.0, "/v1/chat/completions"),
        (91.0, "/v1/completions"),
    ]
    assert changes(verdicts) == [(30.0, Verdict.DEGRADED), (51.0, Verdict.SERVING)]
    assert verdicts.seen[0][1].check is Check.TOOL_CALL
    assert verdicts.seen[0][1].detail.startswith("tool-call canary (auto): no tool call")


def test_two_wrong_tool_calls_in_a_row_are_failing_though_plain_canaries_between_them_passed(
    tmp_path: Path,
) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock, tool_wrong_until=1000.0)
    watch, verdicts = watch_with(tmp_path, clock, server, canary_tool_call_every=3)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 51  # the tool calls of 30 s and 51 s
    assert changes(verdicts) == [(30.0, Verdict.DEGRADED), (51.0, Verdict.FAILING)]
    assert (verdicts.seen[-1][1].check, verdicts.seen[-1][1].figures["errors"]) == (Check.TOOL_CALL, 2)


def test_a_server_without_tool_calling_is_named_once_and_asked_no_more_tool_calls(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock, tools_unconfigured=True)
    notes: list[str] = []
    watch, verdicts = watch_with(tmp_path, clock, server, notes=notes, canary_tool_call_every=2)
    assert run_until_final(watch, verdicts, clock, limit_s=61) is None and verdicts.seen == []
    assert [path for _, path in server.posts()].count("/v1/chat/completions") == 1
    assert len(server.posts()) == 6  # every 10 s, plain ones only after the 400
    [note] = notes
    assert "the server does not do tool calls" in note and "--enable-auto-tool-choice" in note


def test_the_watchs_own_canary_tokens_excuse_no_miss_so_an_idle_hang_keeps_the_bound(tmp_path: Path) -> None:
    """Each answered canary moves the token counter; the canary sent after the hang must not be
    excused as busy by the tokens of the one before (they moved before it was sent)."""
    clock = VirtualClock(actors=3)
    server = Timeline(clock, hang_at=7.0)  # the canaries of 2, 4 and 6 s answered
    watch, verdicts = watch_with(tmp_path, clock, server, canary_interval_s=2, canary_timeout_s=3)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 8 + 3 + 1.5
    assert 8 + 3 + 1.5 - 6 <= 2 + 2 * 3  # from the last answer: within interval + 2 x timeout
    assert changes(verdicts) == [(11.0, Verdict.DEGRADED), (12.5, Verdict.WEDGED)]


def test_a_right_tool_call_every_nth_canary_changes_nothing(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock)
    watch, verdicts = watch_with(tmp_path, clock, server, canary_tool_call_every=2)
    assert run_until_final(watch, verdicts, clock, limit_s=61) is None and verdicts.seen == []
    assert [path for _, path in server.posts()] == ["/v1/completions", "/v1/chat/completions"] * 3


def test_host_memory_low_twice_is_starving_at_the_second_free_read(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    watch, verdicts = watch_with(tmp_path, clock, Timeline(clock), host=(1 << 30, 0))  # 1 GiB < 2 GiB
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 10  # read every 5 s
    assert changes(verdicts) == [(5.0, Verdict.DEGRADED), (10.0, Verdict.STARVING)]
    fast_clock = VirtualClock(actors=3)
    fast, fast_verdicts = watch_with(
        tmp_path, fast_clock, Timeline(fast_clock), host=(1 << 30, 0), canary_interval_s=2
    )
    assert run_until_final(fast, fast_verdicts, fast_clock, limit_s=600) == 4  # at the canary's pace


@pytest.mark.parametrize(("growth_mib", "called_at"), [(500, 100.0), (300, 120.0)])
def test_a_leak_is_called_at_the_first_window_where_the_run_and_the_growth_both_hold(
    tmp_path: Path, growth_mib: int, called_at: float
) -> None:
    """Windows of 20 s, baselined at the 2nd (40 s): 500 MiB a window has grown 3 windows in a row
    and 1500 MiB at 100 s; 300 MiB a window is 1200 MiB over only at 120 s."""
    clock = VirtualClock(actors=3)

    def used(pids: Sequence[int]) -> int:
        windows = (clock.monotonic() - 1000.0) / 20.0
        return int((4000 + growth_mib * windows) * MIB)

    watch, verdicts = watch_with(tmp_path, clock, Timeline(clock), gpu_bytes=used)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == called_at
    [(_, judgement)] = verdicts.seen
    assert (judgement.verdict, judgement.check) == (Verdict.STARVING, Check.LEAK)
    assert judgement.detail.startswith("GPU memory (NVML) grew 3+ windows in a row")


def test_every_miss_is_retried_at_once_not_only_the_one_that_changed_the_verdict(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    server = Timeline(clock, hang_at=0.0)
    watch, verdicts = watch_with(tmp_path, clock, server, wedge_after=3)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 10 + 5 + 2 * 2.5
    assert [at for at, _ in server.posts() if at < 20] == [10.0, 15.0, 17.5]  # the 2nd left it degraded
    assert changes(verdicts) == [(15.0, Verdict.DEGRADED), (20.0, Verdict.WEDGED)]


# ---- the free signals' round, one call at a time on a plain fake clock (no thread started) ----------
PLAN = WatchPlan(
    base_url="http://127.0.0.1:1",
    api_key=None,
    model="m",
    interval_s=15.0,
    timeout_s=10.0,
    stall_s=3.0,
    tool_call_every=0,
    tool_case=None,
    tool_max_tokens=64,
    tool_timeout_s=10.0,
    rules=Rules(),
    min_available_gib=2.0,
    max_swap_gib=None,
    leak_rule=LeakRule(),
    leak_window_s=20.0,
    prefixes=("VLLM",),
)


@dataclass
class Pages:
    """/metrics answers `statuses` in turn (the last from then on), each page a little further on."""

    statuses: list[int] = field(default_factory=lambda: [200])
    generated: int = 0
    running: int = 0
    asked: list[str] = field(default_factory=list)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        self.asked.append(path)
        if path != "/metrics":
            return HttpReply(200, "")
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        self.generated += 10
        body = (
            f'vllm:num_requests_running{{model_name="m"}} {self.running}\n'
            f'vllm:generation_tokens_total{{model_name="m"}} {self.generated}\n'
            f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx"}} {self.generated}\n'
        )
        return HttpReply(status, body if status == 200 else "Not Found")

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        self.asked.append(path)
        return HttpReply(200, COMPLETION)

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        return iter(())


def plain_watch(
    http: Pages,
    plan: WatchPlan = PLAN,
    pids: Callable[[], Sequence[int]] = lambda: [],
    clock: FakeClock | None = None,
) -> tuple[ServingWatch, FakeClock, list[Judgement]]:
    clock = clock or FakeClock()
    told: list[Judgement] = []
    watch = ServingWatch(plan, pids, told.append, host=lambda: PLENTY, clock=clock, http=http)
    return watch, clock, told


def checks_seen(watch: ServingWatch) -> list[str]:
    return [str(obs.check) for _, obs in watch.recent()]


def test_the_free_signals_come_every_free_every_s_and_the_process_states_every_tick() -> None:
    http = Pages()
    watch, clock, _ = plain_watch(http)
    for second in range(1, 11):
        watch.signals_round(clock.now + second)
    assert http.asked == ["/health", "/metrics"] * 2  # at 5 s and at 10 s
    assert checks_seen(watch).count("process") == 10


def test_while_requests_run_metrics_are_read_every_tick_and_traffic_still_at_the_free_pace() -> None:
    http = Pages(running=3)
    watch, clock, _ = plain_watch(http)
    for second in range(1, 11):
        watch.signals_round(clock.now + second)
    assert http.asked == ["/health", "/metrics"] + ["/metrics"] * 4 + ["/health", "/metrics"]
    assert checks_seen(watch).count("metrics") == 6 and checks_seen(watch).count("traffic") == 1


def test_a_metrics_page_that_is_absent_says_nothing_and_traffic_needs_two_readings() -> None:
    http = Pages(statuses=[404, 200, 200])  # vLLM with --disable-log-stats serves no vllm:* families
    watch, clock, told = plain_watch(http)
    watch.signals_round(clock.now + 5)
    assert "metrics" not in checks_seen(watch) and told == []
    watch.signals_round(clock.now + 10)
    assert checks_seen(watch).count("metrics") == 1 and "traffic" not in checks_seen(watch)
    watch.signals_round(clock.now + 15)
    assert checks_seen(watch).count("traffic") == 1


def test_the_leak_window_keeps_its_grid_when_a_round_comes_late() -> None:
    http = Pages()
    watch, clock, _ = plain_watch(http)
    for at in (19.0, 21.0, 39.0, 40.0, 59.0, 60.0):  # the round of 20 s came at 21
        clock.now = 1000.0 + at
        watch.signals_round(clock.now)
    leaks = [obs.at - 1000.0 for _, obs in watch.recent() if obs.check is Check.LEAK]
    assert leaks == [21.0, 40.0, 60.0]  # a grid moved by the late round: 21 and 59


def test_the_groups_pids_are_read_again_every_30_s() -> None:
    listed: list[float] = []
    clock = FakeClock()

    def pids() -> Sequence[int]:
        listed.append(clock.now)
        return []

    watch, _, _ = plain_watch(Pages(), pids=pids, clock=clock)
    for second in range(1, 66):
        clock.now = 1000.0 + second
        watch.signals_round(clock.now)
    assert [at - 1000.0 for at in listed] == [1.0, 31.0, 61.0]


def test_only_a_change_of_verdict_or_check_is_told() -> None:
    http = Pages()
    watch, clock, told = plain_watch(http)
    watch.observe(Observation(Check.HEALTH, Kind.ERROR, 1.0, "/health answered 503"))
    watch.observe(Observation(Check.HEALTH, Kind.ERROR, 6.0, "/health answered 503"))  # same verdict and check
    watch.observe(Observation(Check.HOST_MEMORY, Kind.LOW_MEMORY, 7.0, "low"))  # degraded still, by health
    watch.observe(Observation(Check.HEALTH, Kind.OK, 8.0, "/health 200"))  # now by host memory
    watch.observe(Observation(Check.HOST_MEMORY, Kind.OK, 9.0, "fine"))
    assert [(j.verdict, j.check) for j in told] == [
        (Verdict.DEGRADED, Check.HEALTH),
        (Verdict.DEGRADED, Check.HOST_MEMORY),
        (Verdict.SERVING, None),
    ]
    assert watch.judgement == Judgement(Verdict.SERVING)


def test_a_stopped_watch_judges_nothing_more_and_keeps_only_the_last_observations() -> None:
    http = Pages()
    watch, clock, told = plain_watch(http)
    for second in range(1, 151):
        watch.signals_round(clock.now + second)
    kept = watch.recent()
    assert len(kept) == KEPT_OBSERVATIONS and kept[0][0] == clock.time()  # stamped on the epoch clock
    watch.stop()
    watch.observe(Observation(Check.PROCESS, Kind.BAD_PROCESS, 200.0, "pid 1 is stopped (state T)"))
    assert told == [] and watch.judgement.verdict is Verdict.SERVING and watch.recent() == kept


def test_without_a_tool_case_every_canary_is_a_plain_one() -> None:
    http = Pages()
    plan = dataclasses.replace(PLAN, tool_call_every=2, tool_case=None)
    watch, clock, _ = plain_watch(http, plan=plan)
    dues = [watch.canary_round() - 1000.0 for _ in range(4)]
    assert http.asked == ["/v1/completions"] * 4 and watch.canaries == 4
    assert dues == [15.0] * 4  # answered at once: the next is due one interval on, the clock unmoved
