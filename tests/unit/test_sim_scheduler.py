"""The simulated scheduler's decisions, one step at a time and without its loop (vllm_sim/scheduler.py;
docs/simulator.md "Time model"): who is admitted (max_num_seqs, KV blocks, first come first served),
how a step's token budget is spent on chunked prefill, what a preemption puts back, and what a step
publishes. The step loop itself, with an engine core that runs the steps: test_sim_engine_model.py."""

from __future__ import annotations

import random
from collections.abc import Awaitable

import pytest

from vllm_flags.schema import load_snapshot
from vllm_sim.answers import Answer
from vllm_sim.config import SimConfig, from_namespace
from vllm_sim.generation import build_plan
from vllm_sim.jobs import Job, StepWork
from vllm_sim.metrics import SimMetrics
from vllm_sim.scheduler import Scheduler
from vllm_sim.serve_args import parse

SCHEMA = load_snapshot()


def config(*argv: str) -> SimConfig:
    return from_namespace(parse(["serve", "Qwen/Qwen3-8B", *argv], SCHEMA, environ={}), SCHEMA, environ={})


class NoEngineCore:
    """These tests never step: a scheduler that asks for a step is a test bug."""

    def step(self, work: StepWork) -> Awaitable[None]:
        raise AssertionError(f"stepped: {work}")


def scheduler(*argv: str, blocks: int = 1000, metrics: SimMetrics | None = None) -> Scheduler:
    return Scheduler(config(*argv), metrics or SimMetrics(), blocks, lambda job, reason: None, NoEngineCore())


def job(prompt_tokens: int, first_id: int = 0, answer_tokens: int = 5) -> Job:
    plan = build_plan(
        Answer("text", " ".join(["word"] * answer_tokens)),
        [],
        max_tokens=answer_tokens,
        min_tokens=0,
        ignore_eos=True,
        stop=[],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    return Job(f"r{first_id}", list(range(first_id, first_id + prompt_tokens)), plan, frozenset())


def queue(s: Scheduler, *jobs: Job) -> None:
    s.waiting.extend(jobs)


# ---- admission ---------------------------------------------------------------------------------


def test_no_more_than_max_num_seqs_run_and_the_rest_wait_in_arrival_order() -> None:
    s = scheduler("--max-num-seqs", "2", "--no-enable-prefix-caching")
    jobs = [job(10, first_id=1000 * n) for n in range(5)]
    queue(s, *jobs)
    s._admit()
    assert s.running == jobs[:2] and list(s.waiting) == jobs[2:]
    s._admit()
    assert len(s.running) == 2, "a second look admits nobody while the slots are full"


def test_a_request_waits_while_its_kv_blocks_do_not_fit_beside_the_running_ones() -> None:
    """Blocks of 16 tokens: 100 prompt tokens take 7 of the pool's 10 blocks, kept for the whole
    prompt from admission on, though only the prefilled chunks hold blocks yet."""
    s = scheduler(
        "--block-size", "16", "--max-num-batched-tokens", "32", "--no-enable-prefix-caching", blocks=10
    )
    first, second = job(100), job(100, first_id=500)
    queue(s, first, second)
    s._admit()
    assert s.running == [first] and list(s.waiting) == [second]
    assert s.used_blocks() == 0, "nothing computed yet"
    s._batch()
    s._admit()
    assert s.running == [first] and s.used_blocks() == 2, "one chunk of 32 tokens; the second still waits"


def test_the_first_request_runs_even_when_it_is_larger_than_the_whole_pool() -> None:
    """vLLM would refuse such a request up front; the simulator runs it alone rather than hang it."""
    s = scheduler("--block-size", "16", "--no-enable-prefix-caching", blocks=4)
    big = job(200)
    queue(s, big)
    s._admit()
    s._batch()
    assert s.running == [big] and s.used_blocks() == 13


def test_first_come_first_served_a_small_request_does_not_pass_a_large_one_that_waits() -> None:
    s = scheduler("--block-size", "16", "--no-enable-prefix-caching", blocks=10)
    running, large, small = job(100), job(100, first_id=500), job(10, first_id=900)
    queue(s, running, large, small)
    s._admit()
    assert s.running == [running] and list(s.waiting) == [large, small]


def test_blocks_count_the_tokens_generated_so_far_rounded_up_to_whole_blocks() -> None:
    s = scheduler("--block-size", "16", "--no-enable-prefix-caching")
    request = job(16)
    request.prefill_left = 0
    s.running.append(request)
    assert s.used_blocks() == 1
    request.emitted = 1
    assert s.used_blocks() == 2, "the 17th token opens a block"
    request.emitted = 16
    assert s.used_blocks() == 2


@pytest.mark.parametrize("mode", ["abort", "keep", "wait"])
def test_a_paused_scheduler_admits_nobody(mode: str) -> None:
    s = scheduler()
    queue(s, job(10))
    s.pause(mode)
    s._admit()
    assert s.running == []


def test_a_pool_of_no_blocks_counts_as_one() -> None:
    assert scheduler(blocks=0).num_blocks == 1 and scheduler(blocks=-5).num_blocks == 1


# ---- prefill and decode in one step -----------------------------------------------------------


def test_the_token_budget_is_spent_on_prefill_in_admission_order_and_chunked() -> None:
    s = scheduler("--max-num-batched-tokens", "64", "--no-enable-prefix-caching")
    a, b = job(50), job(40, first_id=500)
    queue(s, a, b)
    s._admit()
    prefilled, decoding, tokens = s._batch()
    assert (prefilled, decoding, tokens) == ([a], [], 64)
    assert (a.prefill_left, b.prefill_left) == (0, 26), "b got the 14 tokens a left"
    prefilled, decoding, tokens = s._batch()
    assert (prefilled, tokens) == ([b], 26) and decoding == [], "a has no token out yet: it does not decode"


def test_a_request_decodes_once_its_prefill_is_done_and_its_first_token_out() -> None:
    s = scheduler("--max-num-batched-tokens", "64", "--no-enable-prefix-caching")
    done, filling = job(8), job(100, first_id=500)
    queue(s, done, filling)
    s._admit()
    done.prefill_left, done.emitted = 0, 1
    prefilled, decoding, tokens = s._batch()
    assert decoding == [done] and prefilled == [] and tokens == 64 and filling.prefill_left == 36


def test_cached_prompt_tokens_cost_no_prefill() -> None:
    s = scheduler("--block-size", "16", "--enable-prefix-caching")
    assert s.cache is not None
    prompt = job(64)
    s.cache.insert(prompt.prompt_ids)
    again = job(64)
    queue(s, again)
    s._admit()
    assert again.cached == 48, "a fully cached prompt still computes its last block (63 // 16 blocks hit)"
    assert again.prefill_left == 16
    assert s._prefix == (64, 48), "queried and hit tokens, published with the step"


def test_without_prefix_caching_every_prompt_token_is_computed() -> None:
    s = scheduler("--no-enable-prefix-caching")
    assert s.cache is None
    request = job(64)
    queue(s, request)
    s._admit()
    assert (request.cached, request.prefill_left) == (0, 64)


# ---- preemption -----------------------------------------------------------------------------


def test_preemption_puts_every_running_request_back_at_the_front_in_order() -> None:
    metrics = SimMetrics()
    s = scheduler("--no-enable-prefix-caching", metrics=metrics)
    a, b, c = job(10), job(10, first_id=100), job(10, first_id=200)
    queue(s, a, b, c)
    s._admit()
    assert s.running == [a, b, c]
    late = job(10, first_id=300)
    queue(s, late)
    assert s.preempt_all() == 3
    assert s.running == [] and list(s.waiting) == [a, b, c, late]
    assert metrics.preemptions == 3 and a.prefill_left == -1


def test_a_preempted_request_recomputes_its_prompt_and_output_but_keeps_its_admission() -> None:
    s = scheduler("--no-enable-prefix-caching")
    request = job(30)
    queue(s, request)
    s._admit()
    admitted = request.admitted_at
    request.prefill_left, request.emitted = 0, 4
    s.preempt_all()
    s._admit()
    assert request.prefill_left == 34 and request.admitted_at == admitted
    assert s.metrics.queue.n == 1, "its queueing time was observed once, at the first admission"


def test_a_preempted_request_recomputes_only_what_the_prefix_cache_does_not_hold() -> None:
    s = scheduler("--block-size", "16", "--enable-prefix-caching")
    request = job(33)
    queue(s, request)
    s._admit()
    assert s.cache is not None and request.prefill_left == 33, "nothing cached at first"
    s.cache.insert(request.prompt_ids)
    request.prefill_left, request.emitted = 0, 4
    s.preempt_all()
    s._admit()
    assert request.prefill_left == 33 + 4 - 32, "its prompt less the 2 cached blocks, plus its output"


# ---- what a step publishes and when there is work --------------------------------------------


def test_the_published_gauges_are_the_counts_and_kv_usage_is_capped_at_one() -> None:
    metrics = SimMetrics()
    s = scheduler(
        "--block-size", "16", "--max-num-seqs", "1", "--no-enable-prefix-caching", blocks=4, metrics=metrics
    )
    queue(s, job(200), job(10, first_id=900))
    s._admit()
    s._batch()
    s._publish()
    assert (metrics.running, metrics.waiting, metrics.kv_usage) == (1, 1, 1.0)
    s.running.clear()
    s._publish()
    assert (metrics.running, metrics.kv_usage) == (0, 0.0)


def test_the_published_kv_usage_grows_with_each_prefill_chunk_and_then_with_each_token() -> None:
    """vLLM allocates KV blocks per scheduled chunk and publishes its usage every step
    (vllm-facts.md §13): 20 blocks of 16 tokens, a 160-token prompt in chunks of 32."""
    metrics = SimMetrics()
    s = scheduler(
        "--block-size", "16", "--max-num-batched-tokens", "32", "--no-enable-prefix-caching",
        blocks=20, metrics=metrics,
    )  # fmt: skip
    request = job(160, answer_tokens=40)
    queue(s, request)
    s._admit()
    published = []
    while request.prefill_left:
        s._batch()
        s._publish()
        published.append(metrics.kv_usage)
    assert published == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5]), "two blocks more each chunk"
    assert (metrics.prompt_tokens, metrics.generation_tokens) == (0, 0), "no token before the first output"
    request.emitted = 17  # the 177th token opens a 12th block
    s._publish()
    assert metrics.kv_usage == pytest.approx(12 / 20)


def test_cached_prompt_tokens_count_as_computed_from_admission() -> None:
    s = scheduler("--block-size", "16", "--max-num-batched-tokens", "16", "--enable-prefix-caching")
    assert s.cache is not None
    first = job(64)
    s.cache.insert(first.prompt_ids)
    again = job(80)
    queue(s, again)
    s._admit()
    assert again.cached == 64 and s.used_blocks() == 4, "its 4 cached blocks are held, nothing computed"
    s._batch()
    assert s.used_blocks() == 5


def test_a_preempted_request_holds_only_what_it_recomputed() -> None:
    s = scheduler("--block-size", "16", "--max-num-batched-tokens", "16", "--no-enable-prefix-caching")
    request = job(32)
    queue(s, request)
    s._admit()
    request.prefill_left, request.emitted = 0, 16
    assert s.used_blocks() == 3
    s.preempt_all()
    s._admit()
    assert request.prefill_left == 48 and s.used_blocks() == 0
    s._batch()
    assert s.used_blocks() == 1


def test_work_while_paused_depends_on_the_mode() -> None:
    s = scheduler()
    s.running.append(job(10))
    s.pause("keep")
    assert not s._has_work(), "keep freezes the batch"
    s.paused = "wait"
    assert s._has_work(), "wait lets the running requests finish"
    s.running.clear()
    assert not s._has_work()
    s._unpublished = True
    assert s._has_work(), "an abort must still be published by one more step"
    s.resume()
    s._unpublished = False
    assert not s._has_work()
    queue(s, job(1))
    assert s._has_work()


def test_an_abort_takes_a_waiting_request_out_and_counts_it_once() -> None:
    metrics = SimMetrics()
    s = scheduler(metrics=metrics)
    request = job(10)
    queue(s, request)
    s.abort(request)
    s.abort(request)
    assert list(s.waiting) == [] and request.finished and metrics.success["abort"] == 1


def test_pausing_with_abort_ends_every_request_with_what_it_had_and_abort_as_its_reason() -> None:
    metrics = SimMetrics()
    finished: list[tuple[str, str]] = []
    s = Scheduler(
        config("--max-num-seqs", "1"),
        metrics,
        1000,
        lambda j, r: finished.append((j.rid, r)),
        NoEngineCore(),
    )
    running, waiting = job(10, first_id=0), job(10, first_id=100)
    queue(s, running, waiting)
    s._admit()
    running.emitted = 2
    s.pause("abort")
    assert s.running == [] and list(s.waiting) == []
    assert running.plan.finish_reason == "abort" and len(running.plan.tokens) == 2
    assert waiting.plan.tokens == () and metrics.success["abort"] == 2
    assert sorted(finished) == [("r0", "abort"), ("r100", "abort")]
    last = running.out.get_nowait()
    assert last is not None and (last.start, last.count, last.done) == (2, 0, True), "the stream is closed"


# ---- the step's duration (docs/simulator.md "Time model") ---------------------------------------


def test_a_prefill_only_step_is_never_slowed_as_eager() -> None:
    eager = scheduler("--enforce-eager")
    assert eager.step_seconds(1000, 0, 0) == pytest.approx((12 + 40.0) / 1000), "no decode: no eager factor"
    assert eager.step_seconds(0, 1, 1) == pytest.approx((12 + 0.08) * 3 / 1000), "eager decode: 3x"


def test_decode_replays_a_graph_up_to_the_largest_captured_size() -> None:
    s = scheduler("--max-num-seqs", "8", "--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8]}')
    assert s.step_seconds(0, 8, 8) == pytest.approx((12 + 0.64) / 1000)
    assert s.step_seconds(0, 8, 9) == pytest.approx((12 + 0.64) * 3 / 1000), (
        "one token past the largest graph"
    )


def test_the_engine_speed_divides_the_whole_step() -> None:
    fast = scheduler("--sim-speed", "10")
    assert fast.step_seconds(500, 2, 2) == pytest.approx(((12 + 0.16) + 40 * 500 / 1000) / 1000 / 10)
