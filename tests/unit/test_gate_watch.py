"""A gate that waits also watches: engine death or a stop ends every wait at once with a FAIL, a
pass from a dead or stopped engine is not a pass, and a memory series with zeros never passes."""

from __future__ import annotations

import dataclasses
import threading
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


# ---- memory_leak's verdict on the two series it samples -------------------------------------------
MIB = 1024 * 1024


@dataclass
class CountingHttp(ModelHttp):
    """Answers every request with `status` and keeps the bodies; `answered` is set at the first one."""

    status: int = 200
    bodies: list[Mapping[str, Any]] = field(default_factory=list)
    answered: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        with self.lock:
            self.bodies.append(body)
        self.answered.set()
        return HttpReply(self.status, "{}")


@dataclass
class SampledMemory:
    """RSS and GPU memory, one value per window (MiB; None: NVML answered nothing), kept with the fake
    time of each sample. The first read is the one before any traffic; the window samples wait until
    a request came back, so the windows saw traffic."""

    clock: FakeClock
    http: CountingHttp
    rss_mib: list[float]
    gpu_mib: list[float | None] | None = None
    before_mib: float = 1500.0
    rss_at: list[float] = field(default_factory=list)
    reads: int = 0

    def rss_bytes(self, pids: Sequence[int]) -> int:
        self.reads += 1
        if self.reads == 1:
            return int(self.before_mib * MIB)
        assert self.http.answered.wait(30.0), "no request came back"
        self.rss_at.append(self.clock.now - 1000.0)
        return int(self.rss_mib[len(self.rss_at) - 1] * MIB)

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        if self.gpu_mib is None:
            return None
        used = self.gpu_mib[len(self.rss_at) - 1]
        return None if used is None else int(used * MIB)


FLAT = [2000.0] * 6
GROWING = [2000.0, 2000.0, 2200.0, 2400.0, 2600.0, 2800.0]  # +600 over the baseline, > FAST's 100


def leak_check(
    rss: list[float], gpu: list[float | None] | None = None, status: int = 200, **table: Any
) -> tuple[Outcome, SampledMemory, CountingHttp]:
    clock = FakeClock()
    http = CountingHttp(status=status)
    memory = SampledMemory(clock, http, rss, gpu)
    ctx = dataclasses.replace(make_context(ScriptedLog(clock), clock), http=http, memory=memory)
    return MemoryLeakGate({**FAST, **table}).check(ctx), memory, http


def test_memory_is_sampled_once_at_the_end_of_each_window() -> None:
    outcome, memory, _ = leak_check(FLAT)
    assert outcome.verdict is Verdict.PASS
    assert [round(at, 6) for at in memory.rss_at] == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert outcome.evidence["rss_before_traffic_mib"] == 1500.0 and outcome.evidence["rss_mib"] == FLAT


def test_a_gpu_leak_under_flat_resident_memory_fails_and_names_the_gpu() -> None:
    outcome, _, _ = leak_check(FLAT, gpu=list(GROWING))
    assert outcome.verdict is Verdict.FAIL
    assert outcome.summary.startswith("gpu leak: grew 3+ windows in a row to +600 MiB")
    assert outcome.evidence["gpu_mib"] == GROWING


def test_both_series_leaking_are_both_named_resident_first() -> None:
    outcome, _, _ = leak_check(GROWING, gpu=list(GROWING))
    assert outcome.summary.startswith("rss leak: grew 3+ windows")
    assert "; gpu leak: grew 3+ windows" in outcome.summary


def test_a_pass_reports_each_series_against_the_rule() -> None:
    outcome, _, http = leak_check(FLAT, gpu=[40000.0] * 6)
    assert outcome.verdict is Verdict.PASS
    rss, gpu = outcome.summary.split("; ")
    assert rss.startswith("rss: +0 MiB since the baseline (2000 MiB)") and gpu.startswith("gpu: +0 MiB")
    assert outcome.evidence["rule"] == {"baseline_window": 2, "consecutive": 3, "min_growth_mib": 100}
    assert outcome.evidence["requests"] == {"completed": len(http.bodies), "failed": 0}


def test_without_nvml_in_any_window_the_gpu_series_is_dropped_not_judged_with_a_hole() -> None:
    outcome, _, _ = leak_check(FLAT, gpu=[40000.0, 40100.0, None, 41000.0, 42000.0, 43000.0])
    assert outcome.verdict is Verdict.PASS and outcome.evidence["gpu_mib"] is None
    assert not outcome.summary.count("gpu")


def test_no_request_that_succeeded_means_no_verdict() -> None:
    outcome, _, http = leak_check(FLAT, status=500)
    assert outcome.verdict is Verdict.FAIL
    assert outcome.summary == f"no request succeeded ({len(http.bodies)} failed): no data, no verdict"
    assert http.bodies


def test_the_traffic_is_the_tables_shape_sent_to_the_listed_model() -> None:
    outcome, _, http = leak_check(FLAT, prompt_paragraphs=3, max_tokens=32, concurrency=2)
    assert outcome.verdict is Verdict.PASS
    assert {b["model"] for b in http.bodies} == {"m"}
    assert {b["max_tokens"] for b in http.bodies} == {32}
    assert all(
        b["messages"][0]["content"].count("\n\n") == 3 for b in http.bodies
    )  # 3 paragraphs, a question
