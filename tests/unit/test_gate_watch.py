"""A gate that waits also watches: engine death or a stop ends every wait at once with a FAIL, a
pass from a dead or stopped engine is not a pass, and a memory series with zeros never passes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gates.chain import ChainRunner
from gates.context import GateContext, HttpReply
from gates.memory_leak import MemoryLeakGate
from gates.outcome import Outcome, Verdict
from tests.doubles import FakeClock, FakeServer, ScriptedLog, make_context

FAST = {"windows": 6, "window_s": 10.0, "baseline_window": 2, "consecutive": 3, "min_growth_mib": 100}


@dataclass
class DyingServer(FakeServer):
    """Alive until the clock passes `dies_at`; its process tree is empty once dead."""

    clock: FakeClock = field(default_factory=FakeClock)
    dies_at: float = float("inf")

    def exit_description(self) -> str | None:
        return "exited with code 1" if self.clock.now >= self.dies_at else None

    def alive(self) -> bool:
        return self.exit_description() is None

    def process_tree(self) -> Sequence[int]:
        return [] if self.clock.now >= self.dies_at else [4242]


class ModelHttp:
    def get(self, path: str, timeout_s: float) -> HttpReply:
        return HttpReply(200, '{"data": [{"id": "m"}]}')

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        return HttpReply(200, "{}")

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        return iter(())


@dataclass
class TreeMemory:
    """RSS of 2 GiB while the tree has processes, 0 once it is empty (what psutil reports)."""

    def rss_bytes(self, pids: Sequence[int]) -> int:
        return 2048 * 1024 * 1024 if pids else 0

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        return None


def _leak_ctx(dies_at: float = float("inf"), stop_at: float = float("inf")) -> tuple[GateContext, FakeClock]:
    clock = FakeClock()
    server = DyingServer(clock=clock, dies_at=clock.now + dies_at)
    ctx = make_context(ScriptedLog(clock), clock, server=server)
    ctx = dataclasses.replace(
        ctx, http=ModelHttp(), memory=TreeMemory(), stop_requested=lambda: clock.now >= 1000.0 + stop_at
    )
    return ctx, clock


def test_memory_leak_gate_fails_at_once_when_the_engine_dies_mid_window() -> None:
    ctx, clock = _leak_ctx(dies_at=25.0)
    outcome = MemoryLeakGate(FAST).check(ctx)
    assert outcome.verdict is Verdict.FAIL
    assert "engine exited with code 1 after 2 of 6 windows" in outcome.summary
    assert clock.now - 1000.0 < 26.0, "the gate slept on through the windows of a dead engine"


def test_memory_leak_gate_ends_at_once_on_a_stop_request_even_with_huge_windows() -> None:
    ctx, clock = _leak_ctx(stop_at=3.0)
    outcome = MemoryLeakGate({**FAST, "window_s": 3600.0}).check(ctx)
    assert outcome.verdict is Verdict.FAIL and outcome.summary.startswith("stopped by a signal")
    assert clock.now - 1000.0 < 4.0


def test_a_series_with_zeros_is_never_a_pass() -> None:
    gate = MemoryLeakGate(FAST)
    outcome = gate.check(_leak_ctx()[0])
    assert outcome.verdict is Verdict.PASS, outcome.summary  # the healthy control
    ctx, _ = _leak_ctx()

    @dataclass
    class GappyMemory(TreeMemory):
        calls: int = 0

        def rss_bytes(self, pids: Sequence[int]) -> int:
            self.calls += 1
            return 0 if self.calls == 4 else 2048 * 1024 * 1024

    gappy = dataclasses.replace(ctx, memory=GappyMemory())
    outcome = MemoryLeakGate(FAST).check(gappy)
    assert outcome.verdict is Verdict.FAIL and "rss was 0 MiB at the end of window(s) [3]" in outcome.summary


@dataclass
class StallingClock(FakeClock):
    """A fake clock whose sleeper is held up once for `stall_s` at `stall_at`: a busy host."""

    stall_at: float = float("inf")
    stall_s: float = 0.0

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.now >= self.stall_at:
            self.now += self.stall_s
            self.stall_at = float("inf")


@dataclass
class LeakingMemory:
    """RSS growing 100 MiB per 10 s window from 2 GiB, as a function of the clock."""

    clock: FakeClock

    def rss_bytes(self, pids: Sequence[int]) -> int:
        return int((2048 + 10.0 * (self.clock.now - 1000.0)) * 1024 * 1024)

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        return None


def test_a_late_sample_does_not_empty_the_next_window_and_hide_a_leak() -> None:
    """Window 4's sample comes 25 s late (the gate's thread was held up): windows on a fixed grid
    sampled 5 and 6 at the same moment, saw no growth between them and called the leak no leak."""
    clock = StallingClock(stall_at=1000.0 + 35.0, stall_s=25.0)
    ctx = make_context(ScriptedLog(clock), clock, server=FakeServer())
    ctx = dataclasses.replace(ctx, http=ModelHttp(), memory=LeakingMemory(clock))
    outcome = MemoryLeakGate(FAST).check(ctx)
    assert outcome.verdict is Verdict.FAIL and "rss leak: grew 3+ windows in a row" in outcome.summary
    series = outcome.evidence["rss_mib"]
    assert len(series) == 6 and all(b - a >= 100 for a, b in zip(series, series[1:], strict=False))


class PassingGate:
    name = "always"
    required = True
    timeout_s = 10.0
    poll_s = 0.5

    def check(self, ctx: GateContext) -> Outcome:
        return Outcome.passed("looked fine")


def test_a_pass_from_a_dead_or_stopped_engine_becomes_a_fail() -> None:
    clock = FakeClock()
    dead = make_context(ScriptedLog(clock), clock, server=FakeServer(died="killed by SIGKILL"))
    report = ChainRunner([PassingGate()]).run(dead)
    assert not report.passed and "engine killed by SIGKILL before the verdict" in report.results[0].summary
    alive = make_context(ScriptedLog(clock), clock)
    stopped = ChainRunner([PassingGate()], should_stop=lambda: True).run(alive)
    assert not stopped.passed and stopped.results[0].summary.startswith("stopped by a signal")
    assert ChainRunner([PassingGate()]).run(alive).passed  # the control: alive and not stopped
