"""The watch's readers: each check as a function of what it reads, returning an `Observation`.

The facts they rely on (vllm-facts.md §8, §13, §7): vLLM's engine core publishes its figures with
every step (running, waiting, KV-cache usage from the step's SchedulerStats; token and request
counters from its outputs), and the API server shows the last ones it received, so an engine core
that stops stepping freezes all of them. A chunked prefill moves no token counter until its last
chunk (the prompt counter counts at the first output), but each chunk's step allocates KV blocks,
so `vllm:kv_cache_usage_perc` moves with every chunk; the instrumentator counts every
request as `http_requests_total{handler,method,status="2xx"|"4xx"|"5xx"}`; `/health` answers 200
with an empty body and 503 once the engine is dead. Process states are Linux's (`T` stopped, `D`
uninterruptible, `Z` zombie).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from gates.canary import Answer, CanaryAnswer
from gates.context import HttpReply
from gates.leak_rule import LeakRule, judge
from gates.tool_cases import CaseResult
from launcher.host.host_checks import check_host_memory, check_swap
from launcher.host.process_view import is_api_server, view_of, vllm_title
from launcher.host.report import CheckStatus
from launcher.watch.verdict import Check, Kind, Observation

MIB = 1 << 20
GIB = 1 << 30
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
GENERATED = "vllm:generation_tokens_total"
# Every figure the engine core's steps publish that the watch compares: any of them moving is progress.
STEPPED = (
    RUNNING,
    WAITING,
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total",
    GENERATED,
    "vllm:iteration_tokens_total_count",
    "vllm:request_success_total",
)
MIN_REQUESTS_FOR_SHARE = 10  # a 5xx share over fewer real requests says nothing
MOSTLY = 0.5


# ---- liveness ------------------------------------------------------------------------------------
def canary_observation(answer: CanaryAnswer, at: float, timeout_s: float) -> Observation:
    kind = {Answer.OK: Kind.OK, Answer.TIMEOUT: Kind.TIMEOUT}.get(answer.answer, Kind.ERROR)
    detail = (
        f"canary: {answer.detail}" if kind is not Kind.OK else f"canary answered in {answer.seconds:.2f} s"
    )
    waited = timeout_s if kind is Kind.TIMEOUT else answer.seconds
    return Observation(Check.CANARY, kind, at, detail, answer.to_json(), waited_s=waited)


def tool_call_observation(result: CaseResult, timed_out: bool, at: float, waited_s: float) -> Observation:
    if timed_out:
        return Observation(
            Check.TOOL_CALL,
            Kind.TIMEOUT,
            at,
            f"tool-call canary ({result.name}): no answer within {waited_s:g} s",
            waited_s=waited_s,
        )
    if not result.ok:
        return Observation(
            Check.TOOL_CALL,
            Kind.ERROR,
            at,
            f"tool-call canary ({result.name}): {result.why}",
            {"case": result.name},
            waited_s=waited_s,
        )
    return Observation(
        Check.TOOL_CALL, Kind.OK, at, f"tool-call canary ({result.name}) passed", waited_s=waited_s
    )


# vLLM's 400 for tool calls asked of a server started without them (vllm-facts.md §5.5 item 5)
TOOLS_UNCONFIGURED = "--enable-auto-tool-choice"


def tool_calls_unconfigured(status: int, body: str, at: float, case: str) -> Observation | None:
    """The server was started without tool calling: the profile's choice, named once, not a sickness."""
    if status != 400 or TOOLS_UNCONFIGURED not in body:
        return None
    detail = (
        f"tool-call canary ({case}): the server does not do tool calls (vLLM answers 400: it needs "
        "--enable-auto-tool-choice and --tool-call-parser); no more tool-call canaries for this engine"
    )
    return Observation(Check.TOOL_CALL, Kind.UNCONFIGURED, at, detail, {"status": status})


def health_observation(reply: HttpReply, at: float, waited_s: float, timeout_s: float) -> Observation:
    if reply.status == 200:
        return Observation(Check.HEALTH, Kind.OK, at, "/health 200", waited_s=waited_s)
    if reply.timed_out:
        return Observation(
            Check.HEALTH, Kind.TIMEOUT, at, f"/health: no answer within {timeout_s:g} s", waited_s=timeout_s
        )
    said = f"answered {reply.status}" if reply.status else f"no connection ({reply.error})"
    return Observation(
        Check.HEALTH, Kind.ERROR, at, f"/health {said}", {"status": reply.status}, waited_s=waited_s
    )


# ---- /metrics: decode progress and real traffic -------------------------------------------------
@dataclass(frozen=True, slots=True)
class MetricsReading:
    at: float
    running: float | None
    generated: float | None
    requests: int  # http_requests_total over every handler and status
    errors: int  # of them, status 5xx
    waiting: float | None = None
    stepped: tuple[float | None, ...] = ()  # the STEPPED figures, in order (empty: no vllm:* at all)

    @property
    def working(self) -> bool:
        """Requests running or waiting, as the engine core last published it."""
        return bool(self.running) or bool(self.waiting)


WANTED = (*STEPPED, "http_requests_total")


def _wanted(line: str) -> bool:
    name = line.split("{", 1)[0].split(" ", 1)[0]
    return name in WANTED


def read_metrics(text: str, at: float) -> MetricsReading:
    """Only the families the watch reads (a /metrics page holds hundreds of lines): their lines go
    through prometheus_client's parser, the rest is never parsed."""
    lines = [line for line in text.splitlines() if _wanted(line)]
    sums: dict[str, float] = {}
    requests = errors = 0
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except ValueError:
        families = []
    for family in families:
        for sample in family.samples:
            if math.isnan(sample.value):
                continue
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
            if sample.name == "http_requests_total":
                requests += int(sample.value)
                errors += int(sample.value) if str(sample.labels.get("status", "")).startswith("5") else 0
    stepped = tuple(sums.get(name) for name in STEPPED)
    if all(value is None for value in stepped):
        stepped = ()
    return MetricsReading(
        at, sums.get(RUNNING), sums.get(GENERATED), requests, errors, sums.get(WAITING), stepped
    )


class EngineProgress:
    """Compares readings: does the engine step? Any figure it publishes moving is progress (a prefill's
    chunks move the KV-cache usage, decode the token counters, the queue the request gauges). With
    requests running, figures frozen for `stall_s` are a stall, or for twice the pace of the last
    steps seen when that is longer: a long prompt's later chunks come slower, but never twice as
    slow as the one before (each costs its fixed part plus attention over what came before it)."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self._last: MetricsReading | None = None
        self._mark: float | None = None  # the last reading at which the engine moved, or had nothing to do
        self._mark_moved = False  # that reading saw the figures move (not idle, not the first)
        self._pace_s = 0.0  # the longest a step could have taken: between the last two moves seen

    def observe(self, reading: MetricsReading) -> Observation:
        last, self._last = self._last, reading
        if not reading.stepped:
            self._mark, self._mark_moved, self._pace_s = None, False, 0.0
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "no engine figures in /metrics")
        moved = last is not None and bool(last.stepped) and reading.stepped != last.stepped
        figures: dict[str, Any] = {
            "running": reading.running,
            "waiting": reading.waiting,
            "generation_tokens": reading.generated,
        }
        if moved and last is not None:
            figures["moved_since"] = last.at  # the figures moved after this reading, before the next
            # The pace is measured between two moves only: from an idle reading it would be the
            # reading cadence, not a step (on the H100 that allowed a hang under streams 10 s).
            self._pace_s = reading.at - self._mark if (self._mark_moved and self._mark is not None) else 0.0
            self._mark, self._mark_moved = reading.at, reading.working
            if reading.working:
                figures["allowed_s"] = round(max(self.stall_s, 2 * self._pace_s), 1)
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "engine stepping", figures)
        if not reading.working or self._mark is None:
            self._mark, self._mark_moved, self._pace_s = reading.at, False, 0.0
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "engine idle", figures)
        frozen_s = reading.at - self._mark
        allowed_s = max(self.stall_s, 2 * self._pace_s)
        figures.update(frozen_s=round(frozen_s, 1), allowed_s=round(allowed_s, 1))
        if frozen_s < allowed_s:
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "engine mid-step", figures)
        detail = (
            f"{reading.running or 0:g} requests running, {reading.waiting or 0:g} waiting, and nothing "
            f"vLLM publishes moved for {frozen_s:.1f} s (tokens, KV-cache usage, requests)"
        )
        return Observation(Check.METRICS, Kind.STALLED, reading.at, detail, figures)


def traffic_observation(before: MetricsReading, after: MetricsReading) -> Observation:
    """The 5xx share of the requests between two readings (the canary's own among them)."""
    requests = after.requests - before.requests
    errors = after.errors - before.errors
    figures = {"requests": requests, "errors_5xx": errors}
    if requests >= MIN_REQUESTS_FOR_SHARE and errors > MOSTLY * requests:
        detail = f"{errors} of {requests} requests answered 5xx in {after.at - before.at:.0f} s"
        return Observation(Check.TRAFFIC, Kind.MOSTLY_5XX, after.at, detail, figures)
    return Observation(Check.TRAFFIC, Kind.OK, after.at, f"{errors} of {requests} requests 5xx", figures)


# ---- the engine's processes ------------------------------------------------------------------------
StateOf = Callable[[int], str | None]


def process_state(pid: int) -> str | None:
    try:
        return str(psutil.Process(pid).status())
    except psutil.Error:
        return None


def process_name(pid: int, prefixes: Sequence[str]) -> str:
    view = view_of(pid)
    if view is None:
        return f"pid {pid}"
    title = vllm_title(view.cmdline, prefixes)
    if title:
        return f"{title} pid {pid}"
    return f"API server pid {pid}" if is_api_server(view) else f"{view.label} pid {pid}"


class ProcessStates:
    """Stopped (`T`, `t`) and zombie processes at once (`degraded`); `D` only once it lasted
    `long_d_s`. A process stopped by a signal (`T`) for `halt_s` halts the engine: the engine core,
    its TP workers and the API server each take part in every step (the workers in each collective),
    so one of them stopped stops them all (`wedged`). A tracing stop (`t`: a debugger, py-spy) stays
    `degraded`: someone is looking at it."""

    BAD = {
        psutil.STATUS_STOPPED: "is stopped (state T)",
        psutil.STATUS_TRACING_STOP: "is stopped (state t)",
        psutil.STATUS_ZOMBIE: "is a zombie (state Z)",
    }

    def __init__(
        self,
        prefixes: Sequence[str],
        long_d_s: float,
        state_of: StateOf = process_state,
        halt_s: float | None = None,
    ) -> None:
        self.prefixes = tuple(prefixes)
        self.long_d_s = long_d_s
        self.halt_s = halt_s
        self.state_of = state_of
        self._since: dict[tuple[int, str], float] = {}  # (pid, state D or T): first seen in it

    def observe(self, pids: Sequence[int], at: float) -> Observation:
        found: list[str] = []
        halted: list[str] = []
        states: dict[int, str] = {}
        for pid in pids:
            state = self.state_of(pid)
            if state is None:
                continue
            states[pid] = state
            lasted = at - self._since.setdefault((pid, state), at)
            if state == psutil.STATUS_DISK_SLEEP:
                if lasted >= self.long_d_s:
                    found.append(f"{process_name(pid, self.prefixes)} is in state D for {lasted:.0f} s")
            elif state in self.BAD:
                found.append(f"{process_name(pid, self.prefixes)} {self.BAD[state]}")
                if state == psutil.STATUS_STOPPED and self.halt_s is not None and lasted >= self.halt_s:
                    halted.append(f"{process_name(pid, self.prefixes)} stopped (state T) for {lasted:.1f} s")
        self._since = {key: t for key, t in self._since.items() if states.get(key[0]) == key[1]}
        figures = {"states": states}
        if halted:
            detail = "; ".join(halted) + ": the engine cannot step"
            return Observation(Check.PROCESS, Kind.HALTED, at, detail, figures)
        if found:
            return Observation(Check.PROCESS, Kind.BAD_PROCESS, at, "; ".join(found), figures)
        return Observation(Check.PROCESS, Kind.OK, at, f"{len(states)} processes running", figures)


# ---- memory: the host's, and the group's under the leak rule --------------------------------------
def host_memory_observation(
    available_bytes: int,
    swap_used_bytes: int,
    min_available_gib: float,
    max_swap_gib: float | None,
    at: float,
) -> Observation:
    ram = check_host_memory(available_bytes, min_available_gib)
    swap = check_swap(swap_used_bytes, max_swap_gib)
    figures = {
        "available_gib": round(available_bytes / GIB, 2),
        "swap_used_gib": round(swap_used_bytes / GIB, 2),
    }
    bad = [c.detail for c in (ram, swap) if c.status is CheckStatus.REFUSED]
    if bad:
        return Observation(Check.HOST_MEMORY, Kind.LOW_MEMORY, at, "; ".join(bad), figures)
    return Observation(Check.HOST_MEMORY, Kind.OK, at, ram.detail, figures)


class LeakWindows:
    """The leak rule of `[gates.memory_leak]`, applied to one sample per window (as the gate does)."""

    def __init__(self, rule: LeakRule) -> None:
        self.rule = rule
        self.series: list[float] = []

    def observe(self, used_bytes: int, source: str, at: float) -> Observation:
        self.series.append(used_bytes / MIB)
        keep = self.rule.windows_needed * 4
        if len(self.series) > keep:
            self.series = self.series[-keep:]
        window = self.series[-(self.rule.windows_needed + 3) :]
        judged = judge(window, self.rule)
        figures = {"source": source, "series_mib": [round(v) for v in window]}
        if judged.leak:
            return Observation(Check.LEAK, Kind.LEAK, at, f"{source} {judged.reason}", figures)
        return Observation(Check.LEAK, Kind.OK, at, f"{source}: {judged.reason}", figures)


def group_memory(
    pids: Sequence[int], gpu_bytes: Callable[[Sequence[int]], int | None] | None
) -> tuple[int, str]:
    """GPU memory of the group where NVML tells it per process, else its RSS (the simulator's)."""
    if gpu_bytes is not None:
        used = gpu_bytes(pids)
        if used is not None:
            return used, "GPU memory (NVML)"
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total, "resident memory"
