"""The per-request histograms vLLM 0.26.0's /metrics page holds (tests/data/real-vllm-0.26/eager/
metrics-*.txt), observed when a request finishes, and the page's other engine families."""

from __future__ import annotations

from dataclasses import dataclass, field

from vllm_sim.metrics import E2E_BUCKETS, ITL_BUCKETS, Histogram

ITERATION_BUCKETS = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
N_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0)


def token_buckets(max_model_len: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, … up to max_model_len (vLLM's `build_1_2_5_buckets`)."""
    out: list[int] = []
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale > max_model_len:
                return tuple(float(b) for b in out)
            out.append(step * scale)
        scale *= 10


@dataclass(slots=True)
class RequestMetrics:
    """Histograms of finished requests and of engine steps."""

    max_model_len: int
    prompt: Histogram = field(init=False)
    generation: Histogram = field(init=False)
    max_generation: Histogram = field(init=False)
    max_tokens: Histogram = field(init=False)
    params_n: Histogram = field(default_factory=lambda: Histogram(N_BUCKETS))
    per_output_token: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    inference: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    prefill: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    prefill_computed: Histogram = field(init=False)
    iteration: Histogram = field(default_factory=lambda: Histogram(ITERATION_BUCKETS))
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        tokens = token_buckets(self.max_model_len)
        self.prompt, self.generation = Histogram(tokens), Histogram(tokens)
        self.max_generation, self.max_tokens = Histogram(tokens), Histogram(tokens)
        self.prefill_computed = Histogram(tokens)

    def finished(
        self, prompt: int, cached: int, generated: int, max_tokens: int, times: tuple[float, float, float]
    ) -> None:
        """`times`: (admitted, first token, finished), monotonic seconds."""
        admitted, first, done = times
        self.prompt.observe(prompt)
        self.generation.observe(generated)
        self.max_generation.observe(max_tokens)
        self.max_tokens.observe(max_tokens)
        self.params_n.observe(1)
        self.prefill_computed.observe(prompt - cached)
        self.cached_tokens += cached
        self.inference.observe(done - admitted)
        self.prefill.observe(first - admitted)
        self.decode.observe(done - first)
        if generated > 1:
            self.per_output_token.observe((done - first) / (generated - 1))
