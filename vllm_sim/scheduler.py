"""The simulated engine's clock: one asyncio step loop with continuous batching.

Each step admits waiting requests while there are `max_num_seqs` slots and KV blocks, spends up to
`max_num_batched_tokens` on prefill (chunked; cached prefix tokens are free), and gives every
decoding request one token (plus accepted draft tokens with spec decoding). A step lasts

    step_s = [(decode_ms + decode_ms_per_seq x n_decode) x eager x slow + prefill_us x prefill_tokens / 1000]
             / 1000 / speed

where eager = --sim-eager-factor when the decode batch is not covered by a captured CUDA graph
(enforce-eager, eager fallback, or more tokens than the largest capture size), else 1.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from vllm_sim.config import SimConfig
from vllm_sim.generation import Plan
from vllm_sim.metrics import SimMetrics
from vllm_sim.prefix_cache import PrefixCache
from vllm_sim.request_metrics import RequestMetrics
from vllm_sim.specdecode import SpecDecode


@dataclass(frozen=True, slots=True)
class Step:
    """Tokens `plan.tokens[start:start+count]` came out at the end of one engine step."""

    start: int
    count: int
    done: bool


@dataclass(eq=False)
class Job:
    """One request inside the engine (mutable: the scheduler advances it)."""

    rid: str
    prompt_ids: list[int]
    plan: Plan
    prompt_words: frozenset[str]
    arrival: float = field(default_factory=time.monotonic)
    out: asyncio.Queue[Step | None] = field(default_factory=asyncio.Queue)
    cached: int = 0
    prefill_left: int = -1
    emitted: int = 0
    admitted_at: float | None = None
    first_at: float | None = None
    last_at: float | None = None
    finished: bool = False
    max_tokens: int = 0  # the request's limit, for vllm:request_params_max_tokens

    @property
    def total(self) -> int:
        return len(self.plan.tokens)


class Scheduler:
    def __init__(
        self, cfg: SimConfig, metrics: SimMetrics, num_blocks: int, on_finished: Callable[[Job, str], None]
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
        self.requests = RequestMetrics(cfg.max_model_len)
        self.waiting: deque[Job] = deque()
        self.running: list[Job] = []
        self._wake = asyncio.Event()
        self.stopped = False

    def submit(self, job: Job) -> None:
        self.waiting.append(job)
        self.metrics.waiting = len(self.waiting)
        self._wake.set()

    def abort(self, job: Job) -> None:
        if job in self.waiting:
            self.waiting.remove(job)
        if job in self.running:
            self.running.remove(job)
        if not job.finished:
            job.finished = True
            self.metrics.success["abort"] += 1
        self._gauges()

    def stop(self) -> None:
        """The engine died: every job in flight gets `None` (an error) and nothing runs any more."""
        self.stopped = True
        for job in list(self.waiting) + self.running:
            job.out.put_nowait(None)
        self.waiting.clear()
        self.running.clear()
        self._wake.set()

    def _blocks(self, job: Job) -> int:
        return math.ceil((len(job.prompt_ids) + job.emitted) / self.cfg.block_size)

    def _admit(self) -> None:
        used = sum(self._blocks(j) for j in self.running)
        while self.waiting and len(self.running) < self.cfg.max_num_seqs:
            job = self.waiting[0]
            need = self._blocks(job)
            if self.running and used + need > self.num_blocks:
                break
            self.waiting.popleft()
            used += need
            job.admitted_at = time.monotonic()
            self.metrics.queue.observe(job.admitted_at - job.arrival)
            job.cached = self.cache.lookup(job.prompt_ids) if self.cache is not None else 0
            job.prefill_left = len(job.prompt_ids) - job.cached
            self.metrics.prefix_queries += len(job.prompt_ids)
            self.metrics.prefix_hits += job.cached
            self.running.append(job)

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
            if not self.waiting and not self.running:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._admit()
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
            k = 1 + (self.spec.k if self.spec else 0)
            started = time.monotonic()
            await asyncio.sleep(
                max(
                    0.0,
                    started
                    + self.step_seconds(prefill_tokens, len(decoding), len(decoding) * k)
                    - time.monotonic(),
                )
            )
            if self.stopped:
                return
            if prefill_tokens or decoding:
                self.requests.iteration.observe(prefill_tokens + len(decoding) * k)
            self._emit(prefilled, decoding)
            self._gauges()

    def _emit(self, prefilled: list[Job], decoding: list[Job]) -> None:
        now = time.monotonic()
        for job in prefilled:
            if self.cache is not None:
                self.cache.insert(job.prompt_ids)
            self.metrics.prompt_tokens += len(job.prompt_ids)
            job.first_at = now
            self.metrics.ttft.observe(now - job.arrival)
            self._advance(job, 1, now)
        for job in decoding:
            if job.finished:
                continue
            count = 1
            if self.spec and job.emitted + 1 < job.total:
                target = job.plan.tokens[job.emitted].text
                upcoming = [t.text for t in job.plan.tokens[job.emitted + 1 : job.emitted + 1 + self.spec.k]]
                count += self.spec.draft(target, upcoming, job.prompt_words)
            self._advance(job, count, now)

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
            job.finished = True
            self.running.remove(job)
            # the engine finished with EOS; "tool_calls" is the API's name for it (vllm-facts.md §7)
            engine_reason = "stop" if job.plan.finish_reason == "tool_calls" else job.plan.finish_reason
            self.metrics.success[engine_reason] += 1
            self.metrics.e2e.observe(now - job.arrival)
            admitted = job.admitted_at if job.admitted_at is not None else job.arrival
            times = (admitted, job.first_at if job.first_at is not None else now, now)
            limit = job.max_tokens or job.total
            self.requests.finished(len(job.prompt_ids), job.cached, job.emitted, limit, times)
            self.on_finished(job, job.plan.finish_reason)

    def _gauges(self) -> None:
        self.metrics.running = len(self.running)
        self.metrics.waiting = len(self.waiting)
        used = sum(self._blocks(j) for j in self.running)
        self.metrics.kv_usage = min(1.0, used / self.num_blocks)
