"""The watch's readers: each check as a function of what it reads, returning an `Observation`.

The facts they rely on (vllm-facts.md §8, §7): vLLM's engine core publishes
`vllm:num_requests_running` and `vllm:generation_tokens_total` (the API server shows the last
figures it received, so a stopped engine core freezes them); the instrumentator counts every
request as `http_requests_total{handler,method,status="2xx"|"4xx"|"5xx"}`; `/health` answers 200
with an empty body and 503 once the engine is dead. Process states are Linux's (`T` stopped, `D`
uninterruptible, `Z` zombie).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
GENERATED = "vllm:generation_tokens_total"
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


WANTED = (RUNNING, GENERATED, "http_requests_total")


def read_metrics(text: str, at: float) -> MetricsReading:
    """Only the three families the watch reads (a /metrics page holds hundreds of lines): the lines
    that begin with their names go through prometheus_client's parser, the rest is never parsed."""
    lines = [line for line in text.splitlines() if line.startswith(WANTED)]
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
    return MetricsReading(at, sums.get(RUNNING), sums.get(GENERATED), requests, errors)


class DecodeProgress:
    """Compares readings: tokens moved, or requests running with the counter frozen for `stall_s`."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self._frozen_since: MetricsReading | None = None  # first reading of the current frozen run
        self._last: MetricsReading | None = None

    def observe(self, reading: MetricsReading) -> Observation:
        last, self._last = self._last, reading
        if reading.generated is None:
            self._frozen_since = None
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "no token counter in /metrics")
        moved = last is not None and last.generated is not None and reading.generated > last.generated
        figures = {"running": reading.running, "generation_tokens": reading.generated, "tokens_moved": moved}
        if moved or not reading.running:
            # a frozen run starts at the reading that last moved (nothing running: at the next one)
            self._frozen_since = reading if (moved and reading.running) else None
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "decode progressing", figures)
        if self._frozen_since is None or self._frozen_since.generated != reading.generated:
            self._frozen_since = reading
        frozen_s = reading.at - self._frozen_since.at
        figures["frozen_s"] = round(frozen_s, 1)
        if frozen_s < self.stall_s:
            return Observation(Check.METRICS, Kind.PROGRESS, reading.at, "decode waiting", figures)
        detail = (
            f"{reading.running:g} requests running and vllm:generation_tokens_total frozen at "
            f"{reading.generated:g} for {frozen_s:.0f} s"
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
    """Stopped (`T`, `t`) and zombie processes at once; `D` only once it lasted `long_d_s`."""

    BAD = {
        psutil.STATUS_STOPPED: "is stopped (state T)",
        psutil.STATUS_TRACING_STOP: "is stopped (state t)",
        psutil.STATUS_ZOMBIE: "is a zombie (state Z)",
    }

    def __init__(self, prefixes: Sequence[str], long_d_s: float, state_of: StateOf = process_state) -> None:
        self.prefixes = tuple(prefixes)
        self.long_d_s = long_d_s
        self.state_of = state_of
        self._d_since: dict[int, float] = {}

    def observe(self, pids: Sequence[int], at: float) -> Observation:
        found: list[str] = []
        states: dict[int, str] = {}
        for pid in pids:
            state = self.state_of(pid)
            if state is None:
                continue
            states[pid] = state
            if state == psutil.STATUS_DISK_SLEEP:
                since = self._d_since.setdefault(pid, at)
                if at - since >= self.long_d_s:
                    found.append(f"{process_name(pid, self.prefixes)} is in state D for {at - since:.0f} s")
            elif state in self.BAD:
                found.append(f"{process_name(pid, self.prefixes)} {self.BAD[state]}")
        self._d_since = {p: t for p, t in self._d_since.items() if states.get(p) == psutil.STATUS_DISK_SLEEP}
        if found:
            return Observation(Check.PROCESS, Kind.BAD_PROCESS, at, "; ".join(found), {"states": states})
        return Observation(Check.PROCESS, Kind.OK, at, f"{len(states)} processes running", {"states": states})


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
