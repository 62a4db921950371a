"""The simulator's /metrics families beyond the engine's (vllm_sim/host_metrics.py): the API server's
process and GC collectors and the HTTP instrumentator's counts, as vLLM 0.26.0 serves them. Read back
with prometheus_client's own parser, the one the bench reads a real server's page with."""

from __future__ import annotations

import os

import psutil
from prometheus_client.parser import text_string_to_metric_families

from vllm_sim.host_metrics import HttpStats, gc_lines, http_lines, process_lines


def families(lines: list[str]) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """{family: {(sample name, labels): value}}, as a Prometheus scraper reads the page."""
    out: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        out[family.name] = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
    return out


def traffic() -> HttpStats:
    http = HttpStats()
    http.observe("/v1/chat/completions", "POST", 200, (420, 1800), 0.3)
    http.observe("/v1/chat/completions", "POST", 200, (380, 2200), 1.2)
    http.observe("/v1/chat/completions", "POST", 400, (90, 150), 0.02)
    http.observe("/v1/models", "GET", 200, (0, 120), 0.004)
    for uncounted in ("/metrics", "/health", "/ping", "/version", "/load"):
        http.observe(uncounted, "GET", 200, (0, 10), 0.001)
    return http


def test_requests_are_counted_by_handler_method_and_status_class() -> None:
    requests = families(http_lines(traffic(), 1_700_000_000.0, created_families=False))["http_requests"]
    assert requests == {
        (
            "http_requests_total",
            (("handler", "/v1/chat/completions"), ("method", "POST"), ("status", "2xx")),
        ): 2.0,
        (
            "http_requests_total",
            (("handler", "/v1/chat/completions"), ("method", "POST"), ("status", "4xx")),
        ): 1.0,
        ("http_requests_total", (("handler", "/v1/models"), ("method", "GET"), ("status", "2xx"))): 1.0,
    }


def test_the_scrapes_and_probes_themselves_are_not_counted() -> None:
    text = "\n".join(http_lines(traffic(), 0.0, created_families=False))
    for uncounted in ("/metrics", "/health", "/ping", "/version", "/load"):
        assert f'handler="{uncounted}"' not in text


def test_request_and_response_sizes_are_summaries_per_handler() -> None:
    found = families(http_lines(traffic(), 0.0, created_families=False))
    chat = (("handler", "/v1/chat/completions"),)
    assert found["http_request_size_bytes"][("http_request_size_bytes_count", chat)] == 3.0
    assert found["http_request_size_bytes"][("http_request_size_bytes_sum", chat)] == 890.0
    assert found["http_response_size_bytes"][("http_response_size_bytes_sum", chat)] == 4150.0


def test_latency_histograms_are_cumulative_and_end_at_the_count() -> None:
    found = families(http_lines(traffic(), 0.0, created_families=False))
    highr = found["http_request_duration_highr_seconds"]
    buckets = [
        (float(dict(labels)["le"]), v) for (name, labels), v in highr.items() if name.endswith("_bucket")
    ]
    assert [v for _, v in sorted(buckets)] == sorted(v for _, v in buckets), "cumulative"
    assert dict(buckets)[0.01] == 1.0 and dict(buckets)[0.5] == 3.0 and dict(buckets)[float("inf")] == 4.0
    assert highr[("http_request_duration_highr_seconds_count", ())] == 4.0
    lowr = found["http_request_duration_seconds"]
    chat = (("handler", "/v1/chat/completions"), ("method", "POST"))
    assert lowr[("http_request_duration_seconds_count", chat)] == 3.0

    def bucket(le: str) -> float:
        return lowr[("http_request_duration_seconds_bucket", tuple(sorted((*chat, ("le", le)))))]

    assert (bucket("0.1"), bucket("0.5"), bucket("1.0"), bucket("+Inf")) == (1.0, 2.0, 2.0, 3.0)


def test_created_families_appear_only_when_the_release_exports_them() -> None:
    without = "\n".join(http_lines(traffic(), 1_700_000_000.0, created_families=False))
    assert "_created" not in without
    found = families(http_lines(traffic(), 1_700_000_000.0, created_families=True))
    created = found["http_requests_created"]
    assert set(created.values()) == {1_700_000_000.0} and len(created) == 3
    assert found["http_request_duration_highr_seconds_created"] == {
        ("http_request_duration_highr_seconds_created", ()): 1_700_000_000.0
    }


def test_no_traffic_is_still_a_valid_page_with_every_family() -> None:
    found = families(http_lines(HttpStats(), 0.0, created_families=False))
    assert set(found) == {
        "http_requests", "http_request_size_bytes", "http_response_size_bytes",
        "http_request_duration_highr_seconds", "http_request_duration_seconds",
    }  # fmt: skip
    assert (
        found["http_request_duration_highr_seconds"][("http_request_duration_highr_seconds_count", ())] == 0.0
    )


def test_the_process_families_are_this_process_own() -> None:
    found = families(process_lines())
    me = psutil.Process()
    assert found["process_start_time_seconds"][("process_start_time_seconds", ())] == me.create_time()
    assert found["process_resident_memory_bytes"][("process_resident_memory_bytes", ())] > 0
    assert found["process_open_fds"][("process_open_fds", ())] >= 3
    assert (
        found["process_max_fds"][("process_max_fds", ())]
        >= found["process_open_fds"][("process_open_fds", ())]
    )
    assert os.getpid() == me.pid


def test_the_gc_families_have_one_sample_per_generation() -> None:
    found = families(gc_lines())
    for name in ("python_gc_objects_collected", "python_gc_objects_uncollectable", "python_gc_collections"):
        generations = sorted(dict(labels)["generation"] for _, labels in found[name])
        assert generations == ["0", "1", "2"], name
