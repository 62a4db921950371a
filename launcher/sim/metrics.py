"""The `vllm:*` Prometheus metrics (FACTS §8), kept by the scheduler and rendered as text.

Counters get `_total` and `_created`, histograms `_bucket`/`_sum`/`_count`, every sample carries
`model_name` and `engine`. With `--disable-log-stats` nothing `vllm:*` is exported.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

from launcher.sim.versions import Dialect

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


@dataclass(slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.buckets):
            self.counts[index] += 1
        self.total += value
        self.n += 1

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for c in self.counts or [0] * len(self.buckets):
            running += c
            out.append(running)
        return out


@dataclass(slots=True)
class SimMetrics:
    """Every number `/metrics` shows; the scheduler and the handlers update it."""

    created: float = field(default_factory=time.time)
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0
    success: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISH_REASONS, 0))
    tool_invocations: dict[tuple[str, str], int] = field(default_factory=dict)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))


class MetricsText:
    """Renders `SimMetrics` in the Prometheus text format with the dialect's metric names."""

    def __init__(self, dialect: Dialect, model_name: str, cache_info: dict[str, str]) -> None:
        self.dialect = dialect
        self.labels = f'engine="0",model_name="{model_name}"'
        self.cache_info = cache_info
        self.lines: list[str] = []
        self._heads: set[str] = set()

    def _head(self, name: str, kind: str, help_text: str) -> None:
        if name not in self._heads:
            self._heads.add(name)
            self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]

    def gauge(self, name: str, value: float, help_text: str) -> None:
        self._head(name, "gauge", help_text)
        self.lines.append(f"{name}{{{self.labels}}} {float(value)}")

    def counter(self, name: str, value: float, help_text: str, created: float, extra: str = "") -> None:
        self._head(name, "counter", help_text)
        labels = self.labels + (f",{extra}" if extra else "")
        self.lines.append(f"{name}_total{{{labels}}} {float(value)}")
        self.lines.append(f"{name}_created{{{labels}}} {created}")

    def histogram(self, name: str, hist: Histogram, help_text: str) -> None:
        self._head(name, "histogram", help_text)
        for bound, count in zip(hist.buckets, hist.cumulative(), strict=True):
            self.lines.append(f'{name}_bucket{{{self.labels},le="{bound}"}} {float(count)}')
        self.lines.append(f'{name}_bucket{{{self.labels},le="+Inf"}} {float(hist.n)}')
        self.lines.append(f"{name}_count{{{self.labels}}} {float(hist.n)}")
        self.lines.append(f"{name}_sum{{{self.labels}}} {hist.total}")

    def render(self, m: SimMetrics, spec: tuple[int, int, int, list[int]] | None, tool_parser: bool) -> str:
        d, c = self.dialect, m.created
        self.gauge("vllm:num_requests_running", m.running, "Number of requests in model execution batches.")
        self.gauge("vllm:num_requests_waiting", m.waiting, "Number of requests waiting to be processed.")
        self.gauge(d.metric_kv_usage, m.kv_usage, "KV-cache usage. 1 means 100 percent usage.")
        info = ",".join(f'{k}="{v}"' for k, v in self.cache_info.items())
        self._head("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
        self.lines.append(f'vllm:cache_config_info{{{info},engine="0"}} 1.0')
        self.counter(
            d.metric_prefix_queries,
            m.prefix_queries,
            "Prefix cache queries, in terms of number of queried tokens.",
            c,
        )
        self.counter(
            d.metric_prefix_hits, m.prefix_hits, "Prefix cache hits, in terms of number of cached tokens.", c
        )
        self.counter(
            "vllm:num_preemptions", m.preemptions, "Cumulative number of preemption from the engine.", c
        )
        self.counter("vllm:prompt_tokens", m.prompt_tokens, "Number of prefill tokens processed.", c)
        self.counter(
            "vllm:generation_tokens", m.generation_tokens, "Number of generation tokens processed.", c
        )
        for reason in FINISH_REASONS:
            self.counter(
                "vllm:request_success",
                m.success[reason],
                "Count of successfully processed requests.",
                c,
                f'finished_reason="{reason}"',
            )
        self.histogram(
            "vllm:time_to_first_token_seconds", m.ttft, "Histogram of time to first token in seconds."
        )
        self.histogram(d.metric_itl, m.itl, "Histogram of inter-token latency in seconds.")
        self.histogram(
            "vllm:e2e_request_latency_seconds", m.e2e, "Histogram of e2e request latency in seconds."
        )
        self.histogram(
            "vllm:request_queue_time_seconds",
            m.queue,
            "Histogram of time spent in WAITING phase for request.",
        )
        if spec is not None:
            drafts, drafted, accepted, per_pos = spec
            self.counter("vllm:spec_decode_num_drafts", drafts, "Number of spec decoding drafts.", c)
            self.counter("vllm:spec_decode_num_draft_tokens", drafted, "Number of draft tokens.", c)
            self.counter("vllm:spec_decode_num_accepted_tokens", accepted, "Number of accepted tokens.", c)
            for pos, value in enumerate(per_pos):
                self.counter(
                    "vllm:spec_decode_num_accepted_tokens_per_pos",
                    value,
                    "Accepted tokens per draft position.",
                    c,
                    f'position="{pos}"',
                )
        if tool_parser:
            for (mode, outcome), value in sorted(m.tool_invocations.items()):
                self.counter(
                    "vllm:tool_call_parser_invocations",
                    value,
                    "Tool call parser invocations.",
                    c,
                    f'mode="{mode}",outcome="{outcome}",request_type="chat_completions"',
                )
        return "\n".join(self.lines) + "\n"
