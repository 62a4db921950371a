"""The small interfaces gates need; `launcher/` supplies the real ones, tests their own doubles.

A gate sees the server only through these: a clock, an HTTP client, the log (facts and lines), the
server's processes and their memory, and what the profile expects. Nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from basis.clock import Clock


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int  # 0 when no connection could be made (refused, reset, timed out)
    body: str
    error: str | None = None
    timed_out: bool = False  # status 0 because the deadline passed (connected or not), not a refusal

    @property
    def connected(self) -> bool:
        return self.status != 0

    def json(self) -> Any:
        import json

        return json.loads(self.body)


class HttpClient(Protocol):
    """HTTP to the server under test; never raises for network errors (status 0 instead).
    Safe to call from several threads at once (a gate may send independent requests together)."""

    def get(self, path: str, timeout_s: float) -> HttpReply: ...

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply: ...

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        """Yield each SSE `data:` payload of a streamed response (ends after `[DONE]`)."""
        ...


class LogView(Protocol):
    """The server's log since this start, as facts (docs/logs.md keys) and as lines."""

    def facts(self) -> Mapping[str, Any]: ...

    def lines_since(self, position: int) -> tuple[Sequence[str], int]:
        """The lines after the first `position` lines of this start, and the position after them:
        each gate reads from where it stopped, never the whole log again. Lines the log no longer
        keeps (it keeps a bounded window) are skipped."""
        ...

    def wait_for_change(self, timeout_s: float) -> None:
        """Return when new log lines arrive, the engine exits, or `timeout_s` passes."""
        ...


class ServerView(Protocol):
    """The engine under test: is it alive, and which processes are its own."""

    def alive(self) -> bool: ...

    def exit_description(self) -> str | None:
        """None while alive, else how it ended ("exited with code 1", "killed by SIGKILL")."""
        ...

    def process_tree(self) -> Sequence[int]: ...


GpuBytesFn = Callable[[Sequence[int]], "int | None"]  # GPU memory held by these pids (None: no NVML)


class MemoryProbe(Protocol):
    def rss_bytes(self, pids: Sequence[int]) -> int: ...

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        """GPU memory held by these pids, or None where there is no NVML."""
        ...


@dataclass(frozen=True, slots=True)
class Expectations:
    """What the profile asks for, in the gates' terms (computed by the launcher from the plan)."""

    served_model_names: tuple[str, ...]
    capture_sizes: tuple[int, ...] | None  # what vLLM will capture; None = hardware-dependent
    # what its config line prints (before spec-decode rounding)
    configured_sizes: tuple[int, ...] | None = None
    enforce_eager: bool = False
    cudagraph_mode: str | None = None  # asked for explicitly in compilation_config, else None
    max_num_seqs: int | None = None
    decode_query_len: int = 1
    max_model_len: int | None = None
    # the model runner vLLM picks for the drafting method (V1 rounds capture sizes; the log's wins)
    model_runner: str = "V2"


@dataclass(frozen=True, slots=True)
class GateContext:
    clock: Clock
    http: HttpClient
    log: LogView
    server: ServerView
    memory: MemoryProbe
    expect: Expectations
    # The chain runner sets it: true once SIGTERM/SIGINT asked the launcher to stop.
    stop_requested: Callable[[], bool] = field(default=lambda: False)


def interruption(ctx: GateContext) -> str | None:
    """Why a gate must stop waiting now (the engine ended, or a stop was asked), else None.

    Every wait inside a gate asks this between short sleeps: a wait that only watches the clock
    measured a dead engine as 0 MiB for minutes and called that "no leak".
    """
    died = ctx.server.exit_description()
    if died is not None:
        return f"engine {died}"
    if ctx.stop_requested():
        return "stopped by a signal"
    return None
