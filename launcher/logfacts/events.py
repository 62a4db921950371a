"""What happened while vLLM started, one event per meaningful line, in log order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    """Startup phases and outcomes, in the order a healthy 0.33 startup shows them (vllm-facts.md §2)."""

    BANNER = "banner"  # version banner: a (new) startup begins; detail: version, startup
    ENGINE_CONFIGURED = "engine_configured"  # `Initializing a V1 LLM engine (v…) with config:`
    LOADING_WEIGHTS = "loading_weights"  # load start, then shard-bar progress (detail n/total)
    WEIGHTS_LOADED = "weights_loaded"  # `Model loading took …` / `Loading weights took …`
    COMPILING = "compiling"  # `Starting torch.compile`
    PROFILING = "profiling"  # memory / CUDA-graph profiling (V2's throwaway capture included)
    KV_CACHE_SIZED = "kv_cache_sized"  # one per `KV cache size` line (per rank in older releases)
    CAPTURING_GRAPHS = "capturing_graphs"  # final capture progress; detail: desc, n, total
    GRAPHS_CAPTURED = "graphs_captured"  # final `Graph capturing finished …`
    ENGINE_INITIALIZED = "engine_initialized"  # `init engine (profile, create kv cache, …) took`
    SERVER_STARTING = "server_starting"  # `Starting vLLM server on …` (older: API server N, Uvicorn)
    READY = "ready"  # uvicorn `Application startup complete.`
    FAILED = "failed"  # startup died; repeated only when a more specific cause shows up
    ENGINE_DIED = "engine_died"  # the engine died after readiness
    MARKER_SEEN = "marker_seen"  # a `--marker` pattern matched (first match per pattern)
    SHUTDOWN = "shutdown"  # shutdown requested / uvicorn shutting down


@dataclass(frozen=True, slots=True)
class LogEvent:
    """`line` is the cleaned text (ANSI and docker/journald prefixes removed); `line_no` is 1-based."""

    kind: EventKind
    line: str
    line_no: int
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "line_no": self.line_no,
            "line": self.line,
            "detail": dict(self.detail),
        }
