"""The simulated engine's clock: one asyncio step loop with continuous batching, each step run by
the engine core.

Each step admits waiting requests while there are `max_num_seqs` slots and KV blocks, spends up to
`max_num_batched_tokens` on prefill (chunked; cached prefix tokens are free), and gives every
decoding request one token (plus accepted draft tokens with spec decoding). A step lasts

    step_s = [(decode_ms + decode_ms_per_seq x n_decode) x eager x slow + prefill_us x prefill_tokens / 1000]
             / 1000 / speed

where eager = --sim-eager-factor when the decode batch is not covered by a captured CUDA graph
(enforce-eager, eager fallback, or more tokens than the largest capture size), else 1.

The step's tokens come out only once the `VLLM::EngineCore` process has run it (`StepGate`: the
grant goes out when the step starts and is answered during its sleep, so it costs no time while the
engine keeps up). A stopped or hung engine core stops every stream at the next step. The gauges the
engine core publishes (running, waiting, KV usage, prefix-cache counts: vLLM's SchedulerStats,
vllm-facts.md §8) change only when a step comes back, so they freeze at their last values.

Every step publishes them, a step of prefill chunks only too, and the KV usage counts the blocks of
the tokens computed so far, as vLLM allocates them chunk by chunk: a long chunked prefill moves
`vllm:kv_cache_usage_perc` each step while the token counters wait for its first token
(vllm-facts.md §13).
"""

from __future__ import annotations

import asyncio
import math
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from vllm_sim.config import SimConfig
from vllm_sim.generation import cut_short, garbled
from vllm_sim.jobs import Job, Step, StepWork
from vllm_sim.metrics import SimMetrics
from vllm_sim.prefix_cache import PrefixCache
from vllm_sim.request_metrics import RequestMetrics
from vllm_sim.specdecode import SpecDecode

__all__ = ["Job", "Scheduler", "Step", "StepGate"]


class StepGate(Protocol):
    """The engine core's side of a step: the returned awaitable completes once it ran the step."""

    def step(self, work: StepWork) -> Awaitable[None]: ...


class Scheduler:
    def __init__(
        self,
        cfg: SimConfig,
        metrics: SimMetrics,
        num_blocks: int,
        on_finished: Callable[[Job, str], None],
        gate: StepGate,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.num_blocks = max(1, num_blocks)
        self.cache = PrefixCache(cfg.block_size, self.num_blocks) if cfg.prefix_caching else None
        self.spec = (
            SpecDecode(cfg.spec_method, cfg.spec_tokens, cfg.timing.spec_acceptance)
            if cfg.spec_method
            else None
        )
        self.on_finished = on_finished
        self.gate = gate
        self.requests = RequestMetrics(cfg.max_model_len)
        self.waiting: deque[Job] = deque()
        self.running: list[Job] = []
        self._wake = asyncio.Event()
        self.stopped = False
        self.paused: str | None = None  # the pause mode while asleep: nothing new is admitted
        self.garbage_weights = False  # after a level-2 wake, until the weights are reloaded
        self._seq = 0
        self._admitted = 0
        self._finished = 0
        self._prefix = (0, 0)  # queried and hit prompt tokens, published with the step's stats
        self._unpublished = False  # a change (abort) that only the next engine step publishes

    # --- what the handlers and the sleep routes ask of the engine ---
    def submit(self, job: Job) -> None:
        if self.stopped:  # it passed the handler's check for a dead engine just before the death
            job.out.put_nowait(None)  # was: waited for ever on a scheduler that no longer runs
            return
        self.waiting.append(job)
        self._wake.set()

    def abort(self, job: Job) -> None:
        if job in self.waiting:
            self.waiting.remove(job)
        if job in self.running:
            self.running.remove(job)
        if not job.finished:
            job.finished = True
            self.metrics.success["abort"] += 1
        self._unpublished = True
        self._wake.set()

    def stop(self) -> None:
        """The engine died: every job in flight gets `None` (an error) and nothing runs any more."""
        self.stopped = True
        for job in list(self.waiting) + self.running:
            job.out.put_nowait(None)
        self.waiting.clear()
        self.running.clear()
        self._wake.set()

    def pause(self, mode: str) -> None:
        """vLLM's `pause_scheduler`: `abort` ends every request in flight (finish_reason abort),
        `keep` freezes them, `wait` lets the running ones finish (see `drained`)."""
        self.paused = mode
        if mode == "abort":
            for job in list(self.waiting) + self.running:
                self._end(job, "abort", time.monotonic())
            self.waiting.clear()
            self._unpublished = True
        self._wake.set()

    def drained(self) -> bool:
        return not self.running

    def resume(self) -> None:
        self.paused = None
        self._wake.set()

    def preempt_all(self) -> int:
        """`reset_prefix_cache(reset_running_requests=True)` (0.26.0 v1/core/sched/scheduler.py:
        2326-2370, `_preempt_request` :1212-1234): every running request frees its blocks and goes
        back to the front of the queue, in order; admitted again (at once, or after the wake), it
        recomputes its prompt and output and goes on to its end. Nothing is published until the
        engine steps again (a paused scheduler does not)."""
        count = len(self.running)
        for job in reversed(self.running):
            job.prefill_left = -1
            self.waiting.appendleft(job)
        self.running.clear()
        self.metrics.preemptions += count
        self._wake.set()
        return count

    def reset_prefix_cache(self) -> None:
        if self.cache is not None:
            self.cache.reset()

    def used_blocks(self) -> int:
        """The KV blocks the running requests hold: those of the tokens computed so far (prompt
        tokens prefilled, cached ones included, and tokens generated). vLLM allocates them chunk
        by chunk (`allocate_slots` for computed + scheduled tokens, vllm-facts.md §13), and its
        KV usage and `reset_prefix_cache` count them."""
        size = self.cfg.block_size
        # computed: the sequence less what is left to prefill (inlined: this runs every step)
        return sum(
            math.ceil((len(j.prompt_ids) + j.emitted - (j.prefill_left if j.prefill_left > 0 else 0)) / size)
            for j in self.running
        )

    # --- the step loop ---
    def _blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.cfg.block_size)

    def _reserved(self, job: Job) -> int:
        """Blocks of the whole sequence so far, computed or not: what admission keeps room for."""
        return self._blocks(len(job.prompt_ids) + job.emitted)

    def _has_work(self) -> bool:
        if self._unpublished:
            return True
        if self.paused is not None:  # `wait` lets the running requests finish, `keep` freezes them
            return self.paused == "wait" and bool(self.running)
        return bool(self.waiting or self.running)

    def _admit(self) -> None:
        """First come first served while a slot is free and the request's whole prompt fits beside
        the whole sequences of those running (vLLM checks the full prompt too, `full_sequence_must_fit`,
        but against the blocks allocated so far: see docs/simulator.md "The engine clock")."""
        used = sum(self._reserved(j) for j in self.running)
        while self.waiting and len(self.running) < self.cfg.max_num_seqs and self.paused is None:
            job = self.waiting[0]
            need = self._reserved(job)
            if self.running and used + need > self.num_blocks:
                break
            self.waiting.popleft()
            used += need
            self._start(job)
            self.running.append(job)

    def _start(self, job: Job) -> None:
        stale = self.cache is not None and self.cache.hits_stale(job.prompt_ids)
        cached = self.cache.lookup(job.prompt_ids) if self.cache is not None else 0
        queried, hits = self._prefix
        self._prefix = (queried + len(job.prompt_ids), hits + cached)
        if job.admitted_at is not None:  # preempted: prompt and output so far are computed again
            job.prefill_left = max(1, len(job.prompt_ids) + job.emitted - cached)
            return
        job.cached = cached
        job.prefill_left = len(job.prompt_ids) - cached
        job.admitted_at = time.monotonic()
        self.metrics.queue.observe(job.admitted_at - job.arrival)
        limit = self.cfg.faults.error_after_requests
        job.fails = limit is not None and self._admitted >= limit
        self._admitted += 1
        if stale or self.garbage_weights:
            job.plan = garbled(job.plan, zlib.crc32(repr(job.prompt_ids).encode()))

    def step_seconds(self, prefill_tokens: int, decode_seqs: int, decode_tokens: int) -> float:
        t = self.cfg.timing
        eager = 1.0 if self.cfg.captured.covers(decode_tokens) or decode_seqs == 0 else t.eager_factor
        decode_ms = (t.decode_ms + t.decode_ms_per_seq * decode_seqs) * eager * self.cfg.faults.slow_decode
        return (decode_ms + t.prefill_us_per_token * prefill_tokens / 1000) / 1000 / t.speed

    async def run(self) -> None:
        """The step loop; a bug in it fails every request in flight instead of hanging them."""
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception:
            import traceback

            traceback.print_exc()
            self.stop()

    async def _loop(self) -> None:
        while not self.stopped:
            if not self._has_work():
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._step()

    def _batch(self) -> tuple[list[Job], list[Job], int]:
        budget = self.cfg.max_num_batched_tokens
        prefilled: list[Job] = []
        decoding: list[Job] = []
        prefill_tokens = 0
        for job in self.running:
            if job.prefill_left > 0:
                take = min(job.prefill_left, budget)
                job.prefill_left -= take
                budget -= take
                prefill_tokens += take
                if job.prefill_left == 0:
                    prefilled.append(job)
            elif job.prefill_left == 0 and job.emitted > 0:
                decoding.append(job)
        return prefilled, decoding, prefill_tokens

    async def _step(self) -> None:
        self._admit()
        prefilled, decoding, prefill_tokens = self._batch()
        self._seq += 1
        work = StepWork(self._seq, self.metrics.generation_tokens, self._finished, len(decoding))
        self._unpublished = False
        ran = self.gate.step(work)
        k = 1 + (self.spec.k if self.spec else 0)
        if prefilled or decoding or prefill_tokens:
            started = time.monotonic()
            seconds = self.step_seconds(prefill_tokens, len(decoding), len(decoding) * k)
            await asyncio.sleep(max(0.0, started + seconds - time.monotonic()))
        await ran
        if self.stopped:
            return
        outputs, tokens = self._emit(prefilled, decoding)
        if outputs:
            self.requests.iteration.observe(tokens)
        self._publish()

    def _emit(self, prefilled: list[Job], decoding: list[Job]) -> tuple[int, int]:
        """Hands out the step's tokens. Returns the step's request outputs and the tokens vLLM's
        `vllm:iteration_tokens_total` observes for them: the computed (uncached) prompt tokens of
        each first output plus the tokens generated (0.26.0 `v1/metrics/loggers.py:1205-1208`); a
        step without an output (prefill chunks only) observes nothing (`async_llm.py:663-665`)."""
        now = time.monotonic()
        generated = self.metrics.generation_tokens
        outputs = prompt = 0
        for job in prefilled:
            if not job.finished:
                outputs += 1
                prompt += self._first_output(job, now)
        for job in decoding:
            if job.finished:
                continue
            outputs += 1
            count = 1
            if self.spec and job.emitted + 1 < job.total:
                target = job.plan.tokens[job.emitted].text
                upcoming = [t.text for t in job.plan.tokens[job.emitted + 1 : job.emitted + 1 + self.spec.k]]
                count += self.spec.draft(target, upcoming, job.prompt_words)
            self._advance(job, count, now)
        return outputs, prompt + self.metrics.generation_tokens - generated

    def _first_output(self, job: Job, now: float) -> int:
        """The output of a request whose prefill just ended (its first token, or its error); returns
        its computed prompt tokens (0 for a preempted request's second prefill: counted once)."""
        if self.cache is not None:
            self.cache.insert(job.prompt_ids)
        prompt = len(job.prompt_ids) - job.cached if job.first_at is None else 0
        if job.fails:  # vLLM's FinishReason.ERROR: the request ends, the engine goes on
            self._end(job, "error", now)
            return prompt
        if job.first_at is None:  # a preempted request's prefill again gives its next token only
            self.metrics.prompt_tokens += len(job.prompt_ids)
            job.first_at = now
            self.metrics.ttft.observe(now - job.arrival)
        self._advance(job, 1, now)
        return prompt

    def _advance(self, job: Job, count: int, now: float) -> None:
        count = min(count, job.total - job.emitted)
        if job.last_at is not None:
            for _ in range(count):
                self.metrics.itl.observe((now - job.last_at) / count)
        job.last_at = now
        start = job.emitted
        job.emitted += count
        self.metrics.generation_tokens += count
        done = job.emitted >= job.total
        job.out.put_nowait(Step(start, count, done))
        if done:
            # the engine finished with EOS; "tool_calls" is the API's name for it (vllm-facts.md §7)
            engine_reason = "stop" if job.plan.finish_reason == "tool_calls" else job.plan.finish_reason
            self._finish(job, engine_reason, now)

    def _end(self, job: Job, reason: str, now: float) -> None:
        """The engine ends a request early: what came out so far, and `reason` as its finish."""
        if job.finished:
            return
        job.plan = cut_short(job.plan, job.emitted, reason)
        job.out.put_nowait(Step(job.emitted, 0, True))
        self._finish(job, reason, now)

    def _finish(self, job: Job, reason: str, now: float) -> None:
        job.finished = True
        if job in self.running:
            self.running.remove(job)
        self._finished += 1
        self.metrics.success[reason] += 1
        self.metrics.e2e.observe(now - job.arrival)
        admitted = job.admitted_at if job.admitted_at is not None else job.arrival
        times = (admitted, job.first_at if job.first_at is not None else now, now)
        limit = job.max_tokens or job.total
        self.requests.finished(len(job.prompt_ids), job.cached, job.emitted, limit, times)
        self.on_finished(job, job.plan.finish_reason)

    def _publish(self) -> None:
        """The engine core's SchedulerStats of this step, as the API server receives them."""
        self.metrics.running = len(self.running)
        self.metrics.waiting = len(self.waiting)
        self.metrics.kv_usage = min(1.0, self.used_blocks() / self.num_blocks)
        self.metrics.prefix_queries, self.metrics.prefix_hits = self._prefix
