"""The serving watch's verdict timings on a virtual clock (tests/virtual_clock.py): the real runner's
two threads, a scripted server, and time that moves only when both wait — so "wedged after 36 s" is
an exact statement about the rules (docs/gates.md "Time to a verdict"), not a measurement.

The scripted server plays what vLLM 0.26 does when its engine core hangs (vllm-facts.md §8):
`/health` still answers 200 at once, `/metrics` shows the last figures the engine core sent, and a
completion gets no answer until the client's deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gates.context import HttpReply
from launcher.profile.candidate import Candidate
from launcher.watch.runner import MIN_CANARY_GAP_S, ServingWatch, WatchPlan
from launcher.watch.verdict import Judgement, Verdict
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


def test_an_idle_hang_is_wedged_after_one_interval_two_deadlines_and_the_retry_gap(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True)
    watch, verdicts = watch_of(tmp_path, clock, engine)
    after = run_until_final(watch, verdicts, clock, limit_s=600)
    assert after == 15 + 10 + MIN_CANARY_GAP_S + 10  # the first canary at 15 s, each waits 10 s
    assert after <= 2 * 15 + 10  # the bound docs/gates.md states: wedge_after × interval + timeout
    kinds = [j.verdict for _, j in verdicts.seen]
    assert kinds == [Verdict.DEGRADED, Verdict.WEDGED]  # the first miss is retried at once
    assert "2 in a row" in verdicts.seen[-1][1].detail


def test_a_shorter_pace_calls_the_hang_sooner_by_the_same_rule(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True)
    watch, verdicts = watch_of(tmp_path, clock, engine, canary_interval_s=2, canary_timeout_s=3)
    assert run_until_final(watch, verdicts, clock, limit_s=600) == 2 + 3 + MIN_CANARY_GAP_S + 3


def test_a_stalled_decode_needs_only_one_missed_canary(tmp_path: Path) -> None:
    clock = VirtualClock(actors=3)
    engine = Engine(clock, hung=True, running=4)  # streams running, the counter frozen
    watch, verdicts = watch_of(tmp_path, clock, engine)
    after = run_until_final(watch, verdicts, clock, limit_s=600)
    # /metrics every 5 s: frozen from the read at 5 s, stalled at the read at 15 s (canary_timeout_s
    # later); the canary sent at 15 s misses at 25 s, and with the stall as evidence that is enough.
    assert after == 25
    assert "decode stalled" in verdicts.seen[-1][1].detail


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
    # 60 s: a canary every 15 s (at 15, 30, 45, 60), /health and /metrics every 5 s
    assert engine.asked.count("/v1/completions") in (3, 4)
    assert engine.asked.count("/health") in (11, 12) and engine.asked.count("/metrics") in (11, 12)
