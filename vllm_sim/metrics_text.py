"""`SimMetrics` and the request histograms as Prometheus text, in the dialect's exposition form.

0.33 (vllm-facts.md §8): a counter is one family `# TYPE x counter` with `x_total` and `x_created` samples.
0.26.0 (its real page, tests/data/real-vllm-0.26/eager/metrics-after.txt): `# TYPE x_total counter`
and a separate `# TYPE x_created gauge` family, a `_created` gauge family for each histogram too,
and families in the page's order.
"""

from __future__ import annotations

from vllm_sim.metrics import FINISH_REASONS, Histogram, SimMetrics
from vllm_sim.request_metrics import RequestMetrics
from vllm_sim.versions import Dialect

Family = tuple[str, str, list[str]]  # kind, help, samples


def sleep_gauges(sleeping: int, level: int) -> tuple[tuple[str, int], ...]:
    """`vllm:engine_sleep_state` as `record_sleep_state(sleep, level)` sets it (0.26.0
    `v1/metrics/loggers.py:1261-1278`): awake 0 while asleep at any level, then the level's flag."""
    asleep = sleeping == 1
    return (
        ("awake", 0 if asleep else 1),
        ("weights_offloaded", int(asleep and level == 1)),
        ("discard_all", int(asleep and level == 2)),
    )


# The HELP texts of 0.26.0's own families, as its /metrics printed them (record/eager/metrics-after.txt).
HELP_026 = {
    "estimated_flops_per_gpu": "Estimated number of floating point operations per GPU (for Model Flops "
    "Utilization calculations).",
    "estimated_read_bytes_per_gpu": "Estimated number of bytes read from memory per GPU (for Model Flops "
    "Utilization calculations).",
    "estimated_write_bytes_per_gpu": "Estimated number of bytes written to memory per GPU (for Model Flops "
    "Utilization calculations).",
    "num_requests_waiting_by_reason": "Number of waiting requests by reason. Reason labels: 'capacity' = "
    "waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV "
    "transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
    "engine_sleep_state": "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine "
    "is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
    "external_prefix_cache_queries": "External prefix cache queries from KV connector cross-instance cache "
    "sharing, in terms of number of queried tokens.",
    "external_prefix_cache_hits": "External prefix cache hits from KV connector cross-instance cache "
    "sharing, in terms of number of cached tokens.",
    "mm_cache_queries": "Multi-modal cache queries, in terms of number of queried items.",
    "mm_cache_hits": "Multi-modal cache hits, in terms of number of cached items.",
}


class MetricsText:
    """Renders the engine's `vllm:*` families with the dialect's metric names and form."""

    def __init__(self, dialect: Dialect, model_name: str, cache_info: dict[str, str]) -> None:
        self.dialect = dialect
        self.split = dialect.created_families
        self.labels = f'engine="0",model_name="{model_name}"'
        self.cache_info = cache_info
        self.families: dict[str, Family] = {}

    def _samples(self, name: str, kind: str, help_text: str) -> list[str]:
        return self.families.setdefault(name, (kind, help_text, []))[2]

    def gauge(self, name: str, value: float, help_text: str, extra: str = "") -> None:
        labels = self.labels + (f",{extra}" if extra else "")
        self._samples(name, "gauge", help_text).append(f"{name}{{{labels}}} {float(value)}")

    def counter(self, name: str, value: float, help_text: str, created: float, extra: str = "") -> None:
        labels = self.labels + (f",{extra}" if extra else "")
        total, made = f"{name}_total{{{labels}}} {float(value)}", f"{name}_created{{{labels}}} {created}"
        if self.split:
            self._samples(f"{name}_total", "counter", help_text).append(total)
            self._samples(f"{name}_created", "gauge", help_text).append(made)
        else:
            self._samples(name, "counter", help_text).extend((total, made))

    def histogram(self, name: str, hist: Histogram, help_text: str, created: float) -> None:
        samples = self._samples(name, "histogram", help_text)
        for bound, count in zip(hist.buckets, hist.cumulative(), strict=True):
            samples.append(f'{name}_bucket{{{self.labels},le="{bound}"}} {float(count)}')
        samples.append(f'{name}_bucket{{{self.labels},le="+Inf"}} {float(hist.n)}')
        samples.append(f"{name}_count{{{self.labels}}} {float(hist.n)}")
        samples.append(f"{name}_sum{{{self.labels}}} {hist.total}")
        if self.split:
            self._samples(f"{name}_created", "gauge", help_text).append(
                f"{name}_created{{{self.labels}}} {created}"
            )

    def render(
        self,
        m: SimMetrics,
        spec: tuple[int, int, int, list[int]] | None,
        tool_parser: bool,
        requests: RequestMetrics | None = None,
    ) -> str:
        """The page's `vllm:*` part (the tool-parser counter is `tool_lines`, after the HTTP part)."""
        self._engine(m, requests)
        self._latency(m, requests)
        info = ",".join(f'{k}="{v}"' for k, v in self.cache_info.items())
        samples = self._samples("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
        samples.append(f'vllm:cache_config_info{{{info},engine="0"}} 1.0')
        if spec is not None:
            self._spec(spec, m.created)
        if tool_parser and not self.split:  # 0.33 keeps it among the engine's families
            self.tool_counter(m)
        return self.text()

    def text(self) -> str:
        lines = []
        for name, (kind, help_text, samples) in self.families.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]
        self.families = {}
        return "\n".join(lines) + "\n" if lines else ""

    def _engine(self, m: SimMetrics, r: RequestMetrics | None) -> None:
        c = m.created
        if self.split:
            for what in ("flops", "read_bytes", "write_bytes"):
                self.counter(f"vllm:estimated_{what}_per_gpu", 0, HELP_026[f"estimated_{what}_per_gpu"], c)
        self.gauge("vllm:num_requests_running", m.running, "Number of requests in model execution batches.")
        self.gauge("vllm:num_requests_waiting", m.waiting, "Number of requests waiting to be processed.")
        if self.split:
            for reason, value in (("capacity", m.waiting), ("deferred", 0)):
                self.gauge(
                    "vllm:num_requests_waiting_by_reason",
                    value,
                    HELP_026["num_requests_waiting_by_reason"],
                    f'reason="{reason}"',
                )
            for state, value in sleep_gauges(*m.sleep_state):
                help_text = HELP_026["engine_sleep_state"]
                self.gauge("vllm:engine_sleep_state", value, help_text, f'sleep_state="{state}"')
        self.gauge(self.dialect.metric_kv_usage, m.kv_usage, "KV-cache usage. 1 means 100 percent usage.")
        self.counter(
            self.dialect.metric_prefix_queries,
            m.prefix_queries,
            "Prefix cache queries, in terms of number of queried tokens.",
            c,
        )
        self.counter(
            self.dialect.metric_prefix_hits,
            m.prefix_hits,
            "Prefix cache hits, in terms of number of cached tokens.",
            c,
        )
        if self.split:
            for name in (
                "external_prefix_cache_queries",
                "external_prefix_cache_hits",
                "mm_cache_queries",
                "mm_cache_hits",
            ):
                self.counter(f"vllm:{name}", 0, HELP_026[name], c)
        self.counter(
            "vllm:num_preemptions", m.preemptions, "Cumulative number of preemption from the engine.", c
        )
        self.counter("vllm:prompt_tokens", m.prompt_tokens, "Number of prefill tokens processed.", c)
        cached = r.cached_tokens if r else 0
        if self.split:
            for source, value in (
                ("local_compute", m.prompt_tokens - cached),
                ("local_cache_hit", cached),
                ("external_kv_transfer", 0),
            ):
                self.counter(
                    "vllm:prompt_tokens_by_source",
                    value,
                    "Number of prompt tokens by source.",
                    c,
                    f'source="{source}"',
                )
            self.counter(
                "vllm:prompt_tokens_cached", cached, "Number of cached prompt tokens (local + external).", c
            )
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

    def _latency(self, m: SimMetrics, r: RequestMetrics | None) -> None:
        c = m.created
        if r is not None:
            for name, hist, what in (
                ("request_prompt_tokens", r.prompt, "Number of prefill tokens processed."),
                ("request_generation_tokens", r.generation, "Number of generation tokens processed."),
                ("iteration_tokens_total", r.iteration, "Histogram of number of tokens per engine_step."),
                (
                    "request_max_num_generation_tokens",
                    r.max_generation,
                    "Histogram of maximum number of requested generation tokens.",
                ),
                ("request_params_n", r.params_n, "Histogram of the n request parameter."),
                ("request_params_max_tokens", r.max_tokens, "Histogram of the max_tokens request parameter."),
            ):
                self.histogram(f"vllm:{name}", hist, what, c)
        self.histogram(
            "vllm:time_to_first_token_seconds", m.ttft, "Histogram of time to first token in seconds.", c
        )
        self.histogram(self.dialect.metric_itl, m.itl, "Histogram of inter-token latency in seconds.", c)
        if r is not None:
            self.histogram(
                "vllm:request_time_per_output_token_seconds",
                r.per_output_token,
                "Histogram of time_per_output_token_seconds per request.",
                c,
            )
        self.histogram(
            "vllm:e2e_request_latency_seconds", m.e2e, "Histogram of e2e request latency in seconds.", c
        )
        self.histogram(
            "vllm:request_queue_time_seconds",
            m.queue,
            "Histogram of time spent in WAITING phase for request.",
            c,
        )
        if r is not None:
            for name, hist, what in (
                (
                    "request_inference_time_seconds",
                    r.inference,
                    "Histogram of time spent in RUNNING phase for request.",
                ),
                (
                    "request_prefill_time_seconds",
                    r.prefill,
                    "Histogram of time spent in PREFILL phase for request.",
                ),
                (
                    "request_decode_time_seconds",
                    r.decode,
                    "Histogram of time spent in DECODE phase for request.",
                ),
                (
                    "request_prefill_kv_computed_tokens",
                    r.prefill_computed,
                    "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
                ),
            ):
                self.histogram(f"vllm:{name}", hist, what, c)

    def _spec(self, spec: tuple[int, int, int, list[int]], c: float) -> None:
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

    def tool_counter(self, m: SimMetrics) -> None:
        """`vllm:tool_call_parser_invocations`: 0.26.0 registers every mode × outcome × request type
        (labels without `engine`); streaming counts each delta the parser saw, non-streaming each reply."""
        name = "vllm:tool_call_parser_invocations"
        what = (  # 0.26.0 parser/metrics.py:39-43
            "Total number of ToolParser invocations. Non-streaming increments once per choice; streaming "
            "increments once per delta."
        )
        model = self.labels.split(",", 1)[1]
        for mode in ("streaming", "non_streaming"):
            for outcome in ("tool_call", "no_tool_call"):
                for kind in ("chat_completions", "responses", "other"):
                    value = m.tool_invocations.get((mode, outcome), 0) if kind == "chat_completions" else 0
                    labels = f'mode="{mode}",{model},outcome="{outcome}",request_type="{kind}"'
                    total = f"{name}_total{{{labels}}} {float(value)}"
                    made = f"{name}_created{{{labels}}} {m.created}"
                    if self.split:
                        self._samples(f"{name}_total", "counter", what).append(total)
                        self._samples(f"{name}_created", "gauge", what).append(made)
                    else:
                        self._samples(name, "counter", what).extend((total, made))
