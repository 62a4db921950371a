"""The /metrics families beyond the engine's: the API server process and its Python (prometheus_client's
default collectors) and its HTTP traffic (prometheus-fastapi-instrumentator), as vLLM 0.26.0 serves
them (tests/data/real-vllm-0.26/eager/metrics-after.txt). Values are this process's own: its resident
memory is what a leak gate on `process_resident_memory_bytes` would read."""

from __future__ import annotations

import gc
import resource
from dataclasses import dataclass, field

import psutil

from vllm_sim.metrics import Histogram

HIGHR_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
LOWR_BUCKETS = (0.1, 0.5, 1.0)
UNCOUNTED = ("/metrics", "/health", "/ping", "/version", "/load")  # not instrumented (the real page)


@dataclass(slots=True)
class HttpStats:
    """What the instrumentator counts per request that passed authentication."""

    requests: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (handler, method, 2xx)
    request_bytes: dict[str, list[float]] = field(default_factory=dict)  # handler → [count, sum]
    response_bytes: dict[str, list[float]] = field(default_factory=dict)
    highr: Histogram = field(default_factory=lambda: Histogram(HIGHR_BUCKETS))
    lowr: dict[tuple[str, str], Histogram] = field(default_factory=dict)

    def observe(self, handler: str, method: str, status: int, sizes: tuple[int, int], seconds: float) -> None:
        if handler in UNCOUNTED:
            return
        key = (handler, method, f"{status // 100}xx")
        self.requests[key] = self.requests.get(key, 0) + 1
        for table, size in ((self.request_bytes, sizes[0]), (self.response_bytes, sizes[1])):
            entry = table.setdefault(handler, [0.0, 0.0])
            entry[0] += 1
            entry[1] += size
        self.highr.observe(seconds)
        self.lowr.setdefault((handler, method), Histogram(LOWR_BUCKETS)).observe(seconds)


def process_lines() -> list[str]:
    """prometheus_client's process and GC collectors, for this process."""
    me = psutil.Process()
    memory, times = me.memory_info(), me.cpu_times()
    cpu = times.user + times.system
    max_fds = float(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    lines = []
    for name, kind, help_text, value in (
        ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", float(memory.vms)),
        ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float(memory.rss)),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            me.create_time(),
        ),
        ("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu),
        ("process_open_fds", "gauge", "Number of open file descriptors.", float(me.num_fds())),
        ("process_max_fds", "gauge", "Maximum number of open file descriptors.", max_fds),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
    return lines


def gc_lines() -> list[str]:
    stats = gc.get_stats()
    lines = []
    for name, key, help_text in (
        ("python_gc_objects_collected_total", "collected", "Objects collected during gc"),
        ("python_gc_objects_uncollectable_total", "uncollectable", "Uncollectable objects found during GC"),
        ("python_gc_collections_total", "collections", "Number of times this generation was collected"),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        lines += [f'{name}{{generation="{g}"}} {float(s[key])}' for g, s in enumerate(stats)]
    return lines


def http_lines(http: HttpStats, created: float, created_families: bool) -> list[str]:
    """The instrumentator's families: a counter, two summaries, two histograms (0.26.0's order)."""
    lines = [
        "# HELP http_requests_total Total number of requests by method, status and handler.",
        "# TYPE http_requests_total counter",
    ]
    lines += [
        f'http_requests_total{{handler="{h}",method="{m}",status="{s}"}} {float(n)}'
        for (h, m, s), n in http.requests.items()
    ]
    if created_families:
        lines += [
            "# HELP http_requests_created Total number of requests by method, status and handler.",
            "# TYPE http_requests_created gauge",
        ]
        lines += [
            f'http_requests_created{{handler="{h}",method="{m}",status="{s}"}} {created}'
            for (h, m, s) in http.requests
        ]
    for name, table, what in (
        ("http_request_size_bytes", http.request_bytes, "Content length of incoming requests by handler."),
        ("http_response_size_bytes", http.response_bytes, "Content length of outgoing responses by handler."),
    ):
        lines += [f"# HELP {name} {what}", f"# TYPE {name} summary"]
        for handler, (count, total) in table.items():
            lines += [
                f'{name}_count{{handler="{handler}"}} {count}',
                f'{name}_sum{{handler="{handler}"}} {total}',
            ]
        if created_families:
            lines += [f"# HELP {name}_created {what}", f"# TYPE {name}_created gauge"]
            lines += [f'{name}_created{{handler="{handler}"}} {created}' for handler in table]
    lines += _histogram(
        "http_request_duration_highr_seconds",
        {"": http.highr},
        created,
        created_families,
        "Latency with many buckets but no API specific labels.",
    )
    lowr = {f'handler="{h}",method="{m}"': hist for (h, m), hist in http.lowr.items()}
    lines += _histogram(
        "http_request_duration_seconds",
        lowr,
        created,
        created_families,
        "Latency with only few buckets by handler.",
    )
    return lines


def _histogram(
    name: str, by_labels: dict[str, Histogram], created: float, families: bool, what: str
) -> list[str]:
    lines = [f"# HELP {name} {what}", f"# TYPE {name} histogram"]
    for labels, hist in by_labels.items():
        sep = "," if labels else ""
        for bound, count in zip(hist.buckets, hist.cumulative(), strict=True):
            lines.append(f'{name}_bucket{{{labels}{sep}le="{bound}"}} {float(count)}')
        lines.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {float(hist.n)}')
        suffix = f"{{{labels}}}" if labels else ""
        lines += [f"{name}_count{suffix} {float(hist.n)}", f"{name}_sum{suffix} {hist.total}"]
    if families:
        lines += [f"# HELP {name}_created {what}", f"# TYPE {name}_created gauge"]
        lines += [
            f"{name}_created{{{labels}}} {created}" if labels else f"{name}_created {created}"
            for labels in by_labels
        ]
    return lines
