"""The run: calibrate, then per context cold TTFT, warm-up of every prompt, and the timed cells.

Order per context (each step guards against one trap, docs/bench.md):
1. cold: `rounds` prompts with unique prefixes, one at a time; the prefix-cache delta around them
   proves (or disproves) they were cold;
2. warm-up: every prompt of the set once, untimed, so no concurrency level is favoured;
3. cells: for each concurrency, `rounds` rounds of whole copies of the same set; /metrics is read
   before and after each round, outside the timed window.
Responses are parsed only when a round is over, and the garbage collector is paused during a
round, so nothing but the network decides when a timestamp is taken.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import itertools
import time
from collections.abc import Callable, Sequence

import aiohttp

from launcher.bench import checks, corpus
from launcher.bench.cells import CellSummary, RoundResult, judge
from launcher.bench.client import Client
from launcher.bench.exchange import Exchange, Phase, Tag
from launcher.bench.options import BenchOptions
from launcher.bench.prefixes import shared_prefixes
from launcher.bench.progress import Progress
from launcher.bench.record import RequestRecord, build_record
from launcher.bench.results import ColdResult, RunResult
from launcher.bench.server_metrics import MetricsSnapshot, parse_text
from launcher.bench.target import Target
from launcher.bench.workload import (
    TEMPLATE_TOKENS,
    BenchPrompt,
    ContextSpec,
    Slot,
    Workload,
    request_body,
    slot_seed,
)

CHAT_PATH = "/v1/chat/completions"
HEADROOM_TOKENS = 64
PROBE_ATTEMPTS = 3
Job = tuple[Tag, bytes]
Sink = Callable[[Sequence[RequestRecord]], None]


class Runner:
    def __init__(
        self,
        client: Client,
        target: Target,
        options: BenchOptions,
        *,
        run_id: str,
        progress: Progress | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.client = client
        self.target = target
        self.options = options
        self.run_id = run_id
        self.workload = Workload(run_id, options.prompts, seed=options.seed)
        self.progress = progress or Progress(1, enabled=False)
        self.sink = sink or (lambda records: None)
        self.reasoning = False
        self._ids = itertools.count(1)

    async def snapshot(self) -> MetricsSnapshot:
        try:
            status, text = await self.client.get_text("/metrics")
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            return MetricsSnapshot(time.time(), error=f"{type(err).__name__}: {err}")
        if status != 200:
            return MetricsSnapshot(time.time(), error=f"/metrics answered HTTP {status}")
        return MetricsSnapshot(time.time(), parse_text(text))

    def body(self, messages: list[dict[str, str]], seed: int | None, max_tokens: int | None = None) -> bytes:
        return request_body(
            self.target.model,
            messages,
            max_tokens=max_tokens or self.options.max_tokens,
            temperature=self.options.temperature,
            seed=seed,
        )

    async def send(self, jobs: Sequence[Job], concurrency: int) -> tuple[list[RequestRecord], float]:
        """Run `jobs` with `concurrency` in flight; records (parsed afterwards) and the wall time."""
        exchanges: list[Exchange | None] = [None] * len(jobs)
        pending = iter(enumerate(jobs))

        async def worker() -> None:
            for i, (tag, body) in pending:
                rid = f"bench-{self.run_id}-{next(self._ids)}"
                exchanges[i] = await self.client.stream(CHAT_PATH, body, tag, rid)
                self.progress.advance()

        collecting = gc.isenabled()
        gc.disable()
        try:
            await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(jobs))))))
        finally:
            if collecting:
                gc.enable()
        done = [e for e in exchanges if e is not None]
        records = [build_record(e) for e in done]
        wall = max(e.t_end for e in done) - min(e.t_send for e in done) if done else 0.0
        self.reasoning = self.reasoning or any(r.reasoning_tokens > 0 or r.reasoning for r in records)
        self.sink(records)
        return records, wall

    async def calibrate(self, notes: list[str]) -> dict[str, float]:
        """Server tokens per estimated token, per language, from one probe each (max_tokens 1).

        The probe shrinks to fit: a tokenizer with a tiny vocabulary can turn 1500 estimated tokens
        into more than max_model_len (seen on a random-weight test model).
        """
        self.progress.stage("calibrating token counts")
        ratios: dict[str, float] = {}
        limit = self.target.max_model_len
        for lang in corpus.LANGS:
            size = float(min(self.options.probe_tokens, limit // 4 if limit else self.options.probe_tokens))
            for _ in range(PROBE_ATTEMPTS):
                text = self.workload.probe_prompt(lang, size)
                messages = [{"role": "user", "content": text}]
                record = (
                    await self.send([(Tag(Phase.PROBE, f"probe-{lang}"), self.body(messages, None, 1))], 1)
                )[0][0]
                if record.ok and record.prompt_tokens:
                    ratios[lang] = (record.prompt_tokens - TEMPLATE_TOKENS) / corpus.estimate_tokens(text)
                    break
                if record.status != 400:
                    break
                size /= 4
            if lang not in ratios:
                notes.append(
                    f"token calibration ({lang}) failed ({record.error or 'no usage'}): lengths are estimates"
                )
        return ratios

    async def cold(self, context: ContextSpec, prompts: Sequence[BenchPrompt]) -> ColdResult:
        self.progress.stage(f"{context.name}: cold TTFT")
        nested = shared_prefixes([p.text for p in prompts])
        before = await self.snapshot()
        records: list[RequestRecord] = []
        for k, prompt in enumerate(prompts):  # one at a time: cold TTFT is prefill alone
            tag = Tag(Phase.COLD, context.name, 1, k + 1, prompt.index)
            records += (
                await self.send(
                    [(tag, self.body(prompt.messages(), slot_seed(self.options.seed, Slot(prompt, k))))], 1
                )
            )[0]
        delta = before.delta(await self.snapshot())
        finding, proof = checks.cold_proof(delta, len(records))
        findings = [finding] if finding else []
        if nested:
            worst = max(nested, key=lambda s: s.share)
            findings.append(
                checks.Finding(
                    checks.Flag.NESTED_PREFIX,
                    f"{len(nested)} cold prompt(s) begin with an "
                    f"earlier one (up to {worst.share:.0%} shared): their TTFT is warm",
                )
            )
        return ColdResult(context, tuple(records), delta, proof, tuple(findings))

    def _slot_jobs(
        self, context: ContextSpec, slots: Sequence[Slot], phase: Phase, concurrency: int, round_no: int
    ) -> list[Job]:
        return [
            (
                Tag(phase, context.name, concurrency, round_no, s.prompt.index, s.copy),
                self.body(s.prompt.messages(), slot_seed(self.options.seed, s)),
            )
            for s in slots
        ]

    async def warm_up(self, context: ContextSpec, prompts: Sequence[BenchPrompt]) -> None:
        self.progress.stage(f"{context.name}: warm-up of all {len(prompts)} prompts")
        slots = [Slot(p, 0) for p in prompts]
        await self.send(self._slot_jobs(context, slots, Phase.WARMUP, 0, 0), max(self.options.concurrency))

    def _signature(self, slot: Slot) -> tuple[str, str]:
        digest = hashlib.blake2b(slot.prompt.text.encode("utf-8"), digest_size=8).hexdigest()
        greedy = self.options.temperature == 0
        return digest, "greedy" if greedy else str(slot_seed(self.options.seed, slot))

    async def cell(
        self, context: ContextSpec, prompts: tuple[BenchPrompt, ...], concurrency: int
    ) -> CellSummary:
        slots = self.workload.round_slots(prompts, concurrency)
        rounds: list[RoundResult] = []
        for r in range(1, self.options.rounds + 1):
            self.progress.stage(f"{context.name} c{concurrency}: round {r}/{self.options.rounds}")
            jobs = self._slot_jobs(context, slots, Phase.TIMED, concurrency, r)
            before = await self.snapshot()
            records, wall = await self.send(jobs, concurrency)
            rounds.append(RoundResult(r, tuple(records), wall, before.delta(await self.snapshot())))
        return judge(
            context.name,
            concurrency,
            tuple(rounds),
            signatures=[self._signature(s) for s in slots],
            reasoning=self.reasoning,
        )

    def fitting(self, notes: list[str]) -> list[ContextSpec]:
        limit = self.target.max_model_len
        out = []
        for spec in self.options.contexts:
            need = spec.tokens + self.options.max_tokens + HEADROOM_TOKENS
            if limit is not None and need > limit:
                notes.append(
                    f"context {spec.name} skipped: {spec.tokens} prompt + {self.options.max_tokens} output "
                    f"tokens do not fit max_model_len {limit}"
                )
                continue
            out.append(spec)
        return out

    def planned(self, contexts: Sequence[ContextSpec]) -> int:
        n, o = self.options.prompts, self.options
        per_context = o.rounds + n + sum(o.rounds * n * -(-c // n) for c in o.concurrency)
        return len(contexts) * per_context + (0 if all(c.short for c in contexts) else len(corpus.LANGS))

    async def run(self) -> RunResult:
        notes: list[str] = []
        before = await self.snapshot()
        if before.error:
            notes.append(f"/metrics unreadable ({before.error}): no hit rate, acceptance or cold proof")
        contexts = self.fitting(notes)
        self.progress.total = max(1, self.planned(contexts))
        ratios = await self.calibrate(notes) if any(not c.short for c in contexts) else {}
        self.workload.ratios = ratios
        colds: list[ColdResult] = []
        cells: list[CellSummary] = []
        for context in contexts:
            prompts = self.workload.prompt_set(context)
            colds.append(
                await self.cold(
                    context, [self.workload.cold_prompt(context, k) for k in range(self.options.rounds)]
                )
            )
            await self.warm_up(context, prompts)
            for concurrency in self.options.concurrency:
                cells.append(await self.cell(context, prompts, concurrency))
        found = [
            checks.fresh_server(before),
            checks.small_max_tokens(self.reasoning, self.options.max_tokens),
        ]
        return RunResult(
            self.run_id,
            self.target,
            self.options,
            before,
            ratios,
            self.reasoning,
            tuple(colds),
            tuple(cells),
            tuple(f for f in found if f is not None),
            tuple(notes),
        )
