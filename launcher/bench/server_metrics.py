"""The server's `/metrics` counters, read before and after a phase: the run's numbers are the deltas.

vLLM's counters are cumulative since the server started (vllm-facts.md §8), so a rate read from one scrape
mixes in every earlier request; only `after - before` belongs to the run. Names (vllm-facts.md §8, 0.33):
prefix cache `vllm:prefix_cache_{queries,hits}_total` (in tokens; older `vllm:gpu_prefix_cache_*`),
spec decode `vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total`. Label sets (engines,
models) are summed. The server's age comes from `process_start_time_seconds`, else from the oldest
`vllm:*_created` sample (prometheus_client stamps counters when they are created, at startup).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
DRAFTS = ("vllm:spec_decode_num_drafts_total",)
DRAFT_TOKENS = ("vllm:spec_decode_num_draft_tokens_total",)
ACCEPTED = ("vllm:spec_decode_num_accepted_tokens_total",)
PROMPT_TOKENS = ("vllm:prompt_tokens_total",)
GENERATION_TOKENS = ("vllm:generation_tokens_total",)
REQUESTS = ("vllm:request_success_total",)
PREEMPTIONS = ("vllm:num_preemptions_total",)
PROCESS_START = "process_start_time_seconds"


def parse_text(text: str) -> dict[str, float]:
    """Prometheus text format → {sample name: sum over its label sets} (`_created`: the earliest).

    prometheus_client's own parser reads the page (label values may hold `}` or escaped quotes).
    It rejects a whole page for one malformed line, so a page that fails is read again line by
    line and only the lines that do not parse are dropped.
    """
    sums: dict[str, float] = {}
    try:
        _add(sums, text)
    except ValueError:
        sums.clear()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                with contextlib.suppress(ValueError):
                    _add(sums, line + "\n")
    return sums


def _add(sums: dict[str, float], text: str) -> None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, float(sample.value)
            if math.isnan(value):
                continue
            if name.endswith("_created"):
                sums[name] = min(sums.get(name, value), value)
            else:
                sums[name] = sums.get(name, 0.0) + value


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """One scrape (`samples` empty and `error` set when /metrics could not be read)."""

    wall: float
    samples: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def first(self, names: tuple[str, ...]) -> float | None:
        return next((self.samples[n] for n in names if n in self.samples), None)

    @property
    def has_prefix_cache(self) -> bool:
        return self.first(PREFIX_QUERIES) is not None

    @property
    def has_spec_decode(self) -> bool:
        return self.first(DRAFT_TOKENS) is not None

    @property
    def started_wall(self) -> float | None:
        """When the server started (unix seconds), if the metrics say."""
        if PROCESS_START in self.samples:
            return self.samples[PROCESS_START]
        created = [v for k, v in self.samples.items() if k.startswith("vllm:") and k.endswith("_created")]
        return min(created) if created else None

    @property
    def uptime_s(self) -> float | None:
        started = self.started_wall
        return None if started is None else max(0.0, self.wall - started)

    @property
    def requests_served(self) -> float | None:
        return self.first(REQUESTS)

    def delta(self, later: MetricsSnapshot) -> MetricsDelta:
        def d(names: tuple[str, ...]) -> float | None:
            a, b = self.first(names), later.first(names)
            return None if a is None or b is None else b - a

        return MetricsDelta(
            prefix_queries=d(PREFIX_QUERIES),
            prefix_hits=d(PREFIX_HITS),
            drafts=d(DRAFTS),
            draft_tokens=d(DRAFT_TOKENS),
            accepted_tokens=d(ACCEPTED),
            prompt_tokens=d(PROMPT_TOKENS),
            generation_tokens=d(GENERATION_TOKENS),
            requests=d(REQUESTS),
            preemptions=d(PREEMPTIONS),
        )


@dataclass(frozen=True, slots=True)
class MetricsDelta:
    """Counter increases over one phase; None where the server does not export the counter."""

    prefix_queries: float | None = None
    prefix_hits: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    requests: float | None = None
    preemptions: float | None = None

    @property
    def hit_rate(self) -> float | None:
        """Prefix-cache hits / queries, in tokens, over the phase."""
        if self.prefix_queries is None or self.prefix_hits is None or self.prefix_queries <= 0:
            return None
        return self.prefix_hits / self.prefix_queries

    @property
    def acceptance(self) -> float | None:
        """Accepted draft tokens / proposed draft tokens over the phase (vllm-facts.md §8)."""
        if self.draft_tokens is None or self.accepted_tokens is None or self.draft_tokens <= 0:
            return None
        return self.accepted_tokens / self.draft_tokens

    def plus(self, other: MetricsDelta) -> MetricsDelta:
        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + b

        return MetricsDelta(*(add(getattr(self, f), getattr(other, f)) for f in _FIELDS))


_FIELDS = (
    "prefix_queries",
    "prefix_hits",
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "prompt_tokens",
    "generation_tokens",
    "requests",
    "preemptions",
)
