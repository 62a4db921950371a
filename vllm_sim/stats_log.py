"""The periodic `Engine 000: Avg prompt throughput ...` line every VLLM_LOG_STATS_INTERVAL s (vllm-facts §2).

Like vLLM, the line goes quiet (DEBUG) once the engine has been idle for two intervals.
"""

from __future__ import annotations

import asyncio
import os

from vllm_sim.server_state import ServerState


class StatsLog:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.interval_s = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
        self._last = (0, 0, 0, 0)
        self._spec_last = (0, 0, 0)
        self._per_position_last: list[int] = []
        self._idle = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.tick()

    def tick(self) -> None:
        m, d = self.state.metrics, self.state.dialect
        now = (m.prompt_tokens, m.generation_tokens, m.prefix_queries, m.prefix_hits)
        prompt, gen, queries, hits = (a - b for a, b in zip(now, self._last, strict=True))
        self._last = now
        busy = prompt or gen or m.running or m.waiting
        self._idle = 0 if busy else self._idle + 1
        if self._idle >= 2:
            return
        line = (
            f"Engine 000: Avg prompt throughput: {prompt / self.interval_s:.1f} tokens/s, Avg generation "
            f"throughput: {gen / self.interval_s:.1f} tokens/s, Running: {m.running} reqs, Waiting: "
            f"{m.waiting} "
            f"reqs, GPU KV cache usage: {m.kv_usage * 100:.1f}%"
        )
        if self.state.cfg.prefix_caching:
            line += f", Prefix cache hit rate: {100 * hits / queries if queries else 0.0:.1f}%"
        self.state.log.info(d.src("stats"), line)
        self._spec_line()

    def _spec_line(self) -> None:
        """`SpecDecoding metrics: ...` of the interval, when it drafted (v1/spec_decode/metrics.py)."""
        spec = self.state.scheduler.spec
        if spec is None:
            return
        s = spec.stats
        drafts, drafted, accepted = (
            a - b for a, b in zip((s.drafts, s.draft_tokens, s.accepted), self._spec_last, strict=True)
        )
        self._spec_last = (s.drafts, s.draft_tokens, s.accepted)
        # each figure is the interval's own: vLLM's SpecDecodingLogging resets after every line
        last = self._per_position_last or [0] * len(s.per_position)
        per_position = [now - before for now, before in zip(s.per_position, last, strict=True)]
        self._per_position_last = list(s.per_position)
        if not drafts:
            return
        rate = accepted / drafted if drafted else 0.0
        per_pos = ", ".join(f"{v / drafts:.3f}" for v in per_position)
        self.state.log.info(
            self.state.dialect.src("spec_stats"),
            (
                f"SpecDecoding metrics: Mean acceptance length: {1 + accepted / drafts:.2f}, Accepted "
                "throughput: "
                f"{accepted / self.interval_s:.2f} tokens/s, Drafted throughput: "
                f"{drafted / self.interval_s:.2f} tokens/s, "
                f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: "
                f"{per_pos}, "
                f"Avg Draft acceptance rate: {rate * 100:.1f}%"
            ),
        )
