"""What the log proves vLLM did: one immutable value, `None` wherever the log does not say.

Nothing here is inferred from vLLM's defaults: a fact is set from a line that states it, or from a
line it follows from (graphs were captured, so not eager); the latter are named in `inferred` with
that line (docs/logs.md lists, for each key, the lines it is read from and the vLLM versions known).
When a log holds several startups (a restart loop under systemd), the facts describe the last one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.logfacts.timeline import Phase


@dataclass(frozen=True, slots=True)
class Concurrency:
    value: float
    max_model_len: int


@dataclass(frozen=True, slots=True)
class CaptureBar:
    desc: str
    n: int
    total: int


@dataclass(frozen=True, slots=True)
class LineRef:
    line: str
    line_no: int


@dataclass(frozen=True, slots=True)
class MarkerHit:
    pattern: str
    found: bool
    line: str | None = None
    line_no: int | None = None


@dataclass(frozen=True, slots=True)
class StartupSummary:
    """One startup of the log: where its banner was (null: the log began mid-startup) and how it ended."""

    line_no: int | None
    vllm_version: str | None
    outcome: str | None
    failure_kind: str | None = None
    failure_line_no: int | None = None


@dataclass(frozen=True, slots=True)
class LogFacts:
    # identity and serving
    vllm_version: str | None = None
    model: str | None = None
    served_model_name: list[str] | None = None
    served_url: str | None = None
    served_port: int | None = None
    # parallelism and limits
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    speculative_config: Any = None
    tool_call_parser: str | None = None
    non_default_args: dict[str, Any] | None = None
    # memory and KV pool
    weights_gib: float | None = None
    weights_load_seconds: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    kv_cache_tokens_per_rank: list[int] | None = None
    max_concurrency: Concurrency | None = None
    max_concurrency_per_rank: list[float] | None = None
    gpu_blocks: int | None = None
    # compile and CUDA graphs
    model_runner: str | None = None
    enforce_eager: bool | None = None
    cudagraph_mode: str | None = None
    capture_sizes: list[int] | None = None
    max_capture_size: int | None = None
    cudagraph_captured: bool | None = None
    graphs_captured: int | None = None
    graphs_expected: int | None = None
    graphs_captured_by_mode: dict[str, int] | None = None
    capture_bars: list[CaptureBar] = field(default_factory=list)
    profiling_graphs: int | None = None
    cudagraph_profile: dict[str, int] | None = None
    capture_seconds: float | None = None
    capture_gib: float | None = None
    capture_line: str | None = None
    compile_seconds: float | None = None
    engine_init_seconds: float | None = None
    startup_seconds: float | None = None
    compile_cache: str | None = None  # hit / miss: graphs loaded from or compiled into the cache (§4)
    compile_cache_dir: str | None = None
    timeline: list[Phase] = field(default_factory=list)  # first line to the server's start (timeline.py)
    # outcome
    outcome: str | None = None
    failure_kind: str | None = None
    failure_line: str | None = None
    failure_line_no: int | None = None
    failure_message: str | None = None  # failure_line without its process, level, time and source
    failure_proc: str | None = None  # the process that printed it: `VllmWorker rank=3`, `Worker_TP1`
    failure_phase: str | None = None  # loading / profiling / capture (how far startup had got)
    failure_argument: str | None = None  # what a refused command line names: `--dtype`, `--omni`
    died_after_ready: LineRef | None = None
    shutdown_seen: bool = False
    markers: list[MarkerHit] = field(default_factory=list)
    startups_seen: int = 0
    startups: list[StartupSummary] = field(default_factory=list)  # the last 1000, this one included
    startup_outcomes: dict[str, int] = field(default_factory=dict)  # all: {"failed:free_memory": 7, ...}
    inferred: dict[str, LineRef] = field(default_factory=dict)  # key -> the line it was inferred from
    lines_read: int = 0
    lines_cut: int = 0  # lines longer than the parser reads (MAX_LINE_CHARS), cut there
    chars_cut: int = 0  # characters dropped from those lines

    def to_json(self) -> dict[str, Any]:
        """A plain dict (json.dumps-able): nested values become dicts and lists."""
        return asdict(self)
