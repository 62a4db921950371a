"""The simulator's engine model without processes: steps that wait for the engine core, what it
publishes, the sleep-mode figures and times fitted on the H200 runs, the fault limits."""

from __future__ import annotations

import asyncio
import random

import pytest

from vllm_flags.schema import load_snapshot
from vllm_sim import timing
from vllm_sim.answers import Answer
from vllm_sim.config import SimConfig, from_namespace
from vllm_sim.faults import BadFaultFlag, check_pressure
from vllm_sim.generation import build_plan, garbled
from vllm_sim.jobs import Job, StepWork
from vllm_sim.memory import plan_memory
from vllm_sim.metrics import SimMetrics
from vllm_sim.metrics_text import sleep_gauges
from vllm_sim.prefix_cache import PrefixCache
from vllm_sim.scheduler import Scheduler
from vllm_sim.serve_args import parse
from vllm_sim.sleep_mode import residue_gib, sleep_figures

SCHEMA = load_snapshot()
GIB_MIB = 1024


def config(*argv: str) -> SimConfig:
    return from_namespace(parse(["serve", "Qwen/Qwen3-8B", *argv], SCHEMA, environ={}), SCHEMA, environ={})


class HeldGate:
    """An engine core that runs a step only when the test says so."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[None]] = []
        self.works: list[StepWork] = []

    def step(self, work: StepWork) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.works.append(work)
        return future

    def run_steps(self) -> None:
        for future in self.pending:
            future.set_result(None)
        self.pending.clear()


def job(tokens: int = 3) -> Job:
    plan = build_plan(
        Answer("text", " ".join(["word"] * tokens)),
        [],
        max_tokens=tokens,
        min_tokens=0,
        ignore_eos=True,
        stop=[],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    return Job("r", list(range(40)), plan, frozenset())


async def settle(gate: HeldGate, steps: int) -> None:
    while len(gate.pending) < steps:
        await asyncio.sleep(0)


def test_no_token_and_no_published_figure_before_the_engine_core_runs_the_step() -> None:
    async def scenario() -> None:
        metrics, gate = SimMetrics(), HeldGate()
        scheduler = Scheduler(config("--sim-speed", "1000"), metrics, 1000, lambda j, r: None, gate)
        loop = asyncio.create_task(scheduler.run())
        request = job()
        scheduler.submit(request)
        await settle(gate, 1)
        for _ in range(20):
            await asyncio.sleep(0.001)  # whatever the wait, a held step gives nothing
        assert request.out.empty() and (metrics.running, metrics.waiting, metrics.generation_tokens) == (
            0,
            0,
            0,
        )
        assert gate.works[0] == StepWork(seq=1, generated=0, finished=0, decoding=0)
        gate.run_steps()
        first = await request.out.get()
        assert first is not None and first.count == 1
        assert metrics.running == 1 and metrics.kv_usage > 0 and metrics.prefix_queries == 40
        await settle(gate, 1)
        assert gate.works[1] == StepWork(seq=2, generated=1, finished=0, decoding=1)
        gate.run_steps()
        await settle(gate, 1)
        gate.run_steps()
        last = await request.out.get()
        last = await request.out.get()
        assert last is not None and last.done and metrics.running == 0 and metrics.generation_tokens == 3
        loop.cancel()

    asyncio.run(scenario())


def test_a_request_submitted_after_the_engine_died_gets_its_error_not_a_hang() -> None:
    """Was (a loaded host): a request that passed the handler's dead-engine check an instant before
    the death was queued on a stopped scheduler, and its client waited for ever."""

    async def scenario() -> None:
        scheduler = Scheduler(config(), SimMetrics(), 1000, lambda j, r: None, HeldGate())
        in_flight = job()
        scheduler.submit(in_flight)
        scheduler.stop()
        late = job()
        scheduler.submit(late)
        assert in_flight.out.get_nowait() is None and late.out.get_nowait() is None
        assert not scheduler.waiting and not scheduler.running

    asyncio.run(scenario())


def test_a_chunked_prefill_publishes_its_kv_usage_each_step_and_its_tokens_with_the_first_output() -> None:
    """vLLM publishes SchedulerStats every step, a step of prefill chunks only too, and allocates the
    KV blocks chunk by chunk; `vllm:iteration_tokens_total` is observed only for a step with outputs,
    with the computed prompt tokens of first outputs plus the tokens generated (vllm-facts.md §13)."""

    async def scenario() -> None:
        metrics, gate = SimMetrics(), HeldGate()
        cfg = config("--sim-speed", "1000", "--max-num-batched-tokens", "16", "--block-size", "16",
                     "--no-enable-prefix-caching")  # fmt: skip
        scheduler = Scheduler(cfg, metrics, 10, lambda j, r: None, gate)
        loop = asyncio.create_task(scheduler.run())
        request = job()  # 40 prompt tokens: chunks of 16, 16 and 8
        scheduler.submit(request)
        usage = []
        for _ in range(2):
            await settle(gate, 1)
            gate.run_steps()
            await settle(gate, 1)  # the next step is asked for once this one is published
            usage.append(metrics.kv_usage)
        assert usage == pytest.approx([0.1, 0.2]) and request.out.empty()
        assert (metrics.prompt_tokens, metrics.generation_tokens, scheduler.requests.iteration.n) == (0, 0, 0)
        gate.run_steps()
        first = await request.out.get()
        assert first is not None and first.count == 1
        assert (metrics.prompt_tokens, metrics.generation_tokens) == (40, 1)
        assert metrics.kv_usage == pytest.approx(0.3)
        iteration = scheduler.requests.iteration
        assert (iteration.n, iteration.total) == (1, 41), "the whole prompt and the first token, once"
        await settle(gate, 1)
        gate.run_steps()
        await request.out.get()
        assert (iteration.n, iteration.total) == (2, 42), "one token decoded"
        loop.cancel()

    asyncio.run(scenario())


def test_an_abort_while_paused_is_published_by_one_more_engine_step() -> None:
    """A frozen batch (sleep with mode=keep) steps no more; a client leaving it still changes the
    published figures, through one empty step of the engine core (vLLM steps once more to remove a
    finished request)."""

    async def scenario() -> None:
        metrics, gate = SimMetrics(), HeldGate()
        scheduler = Scheduler(config("--sim-speed", "1000"), metrics, 1000, lambda j, r: None, gate)
        loop = asyncio.create_task(scheduler.run())
        request = job(50)
        scheduler.submit(request)
        await settle(gate, 1)
        gate.run_steps()
        await request.out.get()
        await settle(gate, 1)
        scheduler.pause("keep")
        gate.run_steps()  # the step in flight ends; then the loop waits
        for _ in range(10):
            await asyncio.sleep(0)
        assert not gate.pending and metrics.running == 1
        steps = len(gate.works)
        scheduler.abort(request)
        await settle(gate, 1)
        assert gate.works[steps].decoding == 0 and metrics.running == 1  # not published before it ran
        gate.run_steps()
        for _ in range(10):
            await asyncio.sleep(0)
        assert metrics.running == 0 and metrics.success["abort"] == 1 and not gate.pending
        loop.cancel()

    asyncio.run(scenario())


def test_errors_start_after_the_first_n_requests() -> None:
    async def scenario() -> None:
        metrics, gate = SimMetrics(), HeldGate()
        scheduler = Scheduler(
            config("--sim-speed", "1000", "--sim-error-after-requests", "1"),
            metrics,
            1000,
            lambda j, r: None,
            gate,
        )
        loop = asyncio.create_task(scheduler.run())
        good, bad = job(), job()
        scheduler.submit(good)
        scheduler.submit(bad)
        while not (good.finished and bad.finished):
            await asyncio.sleep(0)
            gate.run_steps()
        assert good.plan.finish_reason == "length" and bad.plan.finish_reason == "error" and bad.emitted == 0
        assert metrics.success["error"] == 1
        loop.cancel()

    asyncio.run(scenario())


REAL_TIME = timing.Timing(speed=1.0)


@pytest.mark.parametrize(
    ("weights", "first", "expected", "low", "high"),
    [
        (0.0, True, 0.145, 0.12, 0.17),  # tiny: 0.12-0.17 s
        (5.29, True, 2.7, 2.7, 3.3),  # 2.84 B, first sleep: 2.7 s, and 3.25 s in the i32 recording
        (5.29, False, 0.145, 0.12, 0.17),  # 2.84 B, later: 0.14-0.17 s
    ],
)
def test_sleep_time_fits_the_measured_runs(
    weights: float, first: bool, expected: float, low: float, high: float
) -> None:
    seconds = timing.sleep_seconds(weights, 1, first, REAL_TIME)
    assert seconds == pytest.approx(expected, abs=0.01) and low <= seconds <= high
    assert timing.sleep_seconds(weights, 1, first, timing.Timing(speed=10.0)) == pytest.approx(seconds / 10)
    assert timing.sleep_seconds(weights, 2, True, REAL_TIME) == pytest.approx(0.145)  # nothing to copy
    assert timing.sleep_seconds(weights, 0, True, REAL_TIME) == 0.0


def test_the_first_sleeps_pinning_is_a_one_off_scaled_as_the_startup_is() -> None:
    """Serving steps at --sim-speed, one-off setup at --sim-startup-speed: a suite that starts at
    1000x does not wait 2.7 s for the first sleep, and the later sleeps keep the engine's clock."""
    fast_start = timing.Timing(speed=2.0, startup_speed=1000.0)
    first = timing.sleep_seconds(5.29, 1, True, fast_start)
    later = timing.sleep_seconds(5.29, 1, False, fast_start)
    assert later == pytest.approx(0.145 / 2) and first == pytest.approx(0.145 / 2 + (2.7 - 0.145) / 1000)
    assert timing.sleep_seconds(5.29, 2, True, fast_start) == pytest.approx(later)  # level 2 pins nothing


def test_wake_time_fits_the_measured_runs_and_grows_with_the_weights() -> None:
    tiny, big = timing.wake_seconds(0.0, True, 1.0), timing.wake_seconds(5.29, True, 1.0)
    assert 0.06 <= tiny <= 0.09 and 0.23 <= big <= 0.32
    assert timing.wake_seconds(54.0, True, 1.0) > big  # 27 B at bf16: ~2 s of copying back
    assert timing.wake_seconds(5.29, True, 50.0) == pytest.approx(big / 50)
    assert timing.wake_seconds(5.29, False, 1.0) == pytest.approx(tiny)  # after level 2: nothing to copy


def test_residue_is_the_measured_one_and_not_extrapolated() -> None:
    assert residue_gib(0.0) * GIB_MIB == pytest.approx(926)
    assert residue_gib(5.29) * GIB_MIB == pytest.approx(1656)
    assert residue_gib(140.0) * GIB_MIB == pytest.approx(1656)


def test_sleep_figures_level_by_level() -> None:
    plan = plan_memory(
        model="m-3B", total_gib=80, free_gib=70, util=0.5, tp=1, weights_override=5.29,
        bytes_per_token_override=None, kv_dtype="auto", mnbt=2048, graphs=102, block_size=16,
        max_model_len=4096,
    )  # fmt: skip
    one = sleep_figures(plan, 1, pooled=True)
    assert one.backed_up == 5.29 and one.pool <= one.freed
    assert one.resident == pytest.approx(residue_gib(5.29)) and one.freed == pytest.approx(40 - one.resident)
    assert one.in_use == pytest.approx(10 + one.resident)  # the others' 10 GiB and the residue
    assert sleep_figures(plan, 2, pooled=True).backed_up == 0.0
    nothing = sleep_figures(plan, 1, pooled=False)
    assert (nothing.freed, nothing.resident, nothing.in_use) == (0.0, 40.0, 50.0)


def test_sleep_state_gauges() -> None:
    assert dict(sleep_gauges(0, 0)) == {"awake": 1, "weights_offloaded": 0, "discard_all": 0}
    assert dict(sleep_gauges(1, 1)) == {"awake": 0, "weights_offloaded": 1, "discard_all": 0}
    assert dict(sleep_gauges(1, 2)) == {"awake": 0, "weights_offloaded": 0, "discard_all": 1}
    assert dict(sleep_gauges(1, 0)) == {"awake": 0, "weights_offloaded": 0, "discard_all": 0}


def test_garbage_keeps_the_length_and_the_ending() -> None:
    plan = job(5).plan
    bad = garbled(plan, 1)
    assert len(bad.tokens) == len(plan.tokens) and bad.finish_reason == "length"
    assert "".join(t.text for t in bad.tokens) != "".join(t.text for t in plan.tokens)
    assert garbled(plan, 1) == bad  # deterministic for one prompt


def test_a_stale_block_makes_its_prompts_stale_until_the_reset() -> None:
    cache = PrefixCache(4, 100)
    prompt = list(range(20))
    cache.insert(prompt)
    assert not cache.hits_stale(prompt)
    cache.mark_stale()
    assert cache.hits_stale(prompt) and cache.hits_stale(prompt[:9]) and not cache.hits_stale([99] * 20)
    cache.reset()
    assert not cache.hits_stale(prompt) and cache.lookup(prompt) == 0


def test_host_pressure_limits() -> None:
    gib = 1024**3
    check_pressure(2048, available_bytes=4 * gib)  # 2 GiB left: fine
    with pytest.raises(BadFaultFlag, match="would leave less than 1024 MiB available .* at most 1024"):
        check_pressure(2048, available_bytes=2 * gib)
    with pytest.raises(BadFaultFlag, match="must be 0..8192, not 8193"):
        check_pressure(8193, available_bytes=64 * gib)
    check_pressure(0, available_bytes=0)  # no pressure: nothing to check


def test_the_wire_carries_every_message_back_as_it_was_sent() -> None:
    from vllm_sim import wire

    for message in [
        ("step", 7, 1234, 5, 3),
        ("stepped", 2**40),
        ("call", 1, "wake_up", (["weights"],)),
        ("result", 1, False, "Call to wake_up method failed: x"),
        ("ready", 42),
    ]:
        assert wire.decode(wire.encode(message)) == message
    assert len(wire.encode(("stepped", 1))) == 9  # packed, not pickled
    with pytest.raises(ValueError, match="not a simulator message"):
        wire.decode(b"xjunk")
