"""The simulator's `vllm:*` part of `/metrics` (`vllm_sim/metrics_text.py`) against vLLM 0.26.0's real
page (tests/data/real-vllm-0.26/eager/metrics-after.txt): every family, its type and help text in the
page's order, its labels, and what the counters say after the requests the page counted; and 0.33's
form, one counter family with `_total` and `_created` samples (vllm-facts.md §8).
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from vllm_sim.metrics import SimMetrics
from vllm_sim.metrics_text import MetricsText
from vllm_sim.request_metrics import RequestMetrics
from vllm_sim.versions import V026, V033, Dialect

REAL = (
    Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "eager" / "metrics-after.txt"
).read_text(encoding="utf-8")
CACHE_INFO = {"block_size": "16", "cache_dtype": "auto"}


def page(dialect: Dialect = V026, metrics: SimMetrics | None = None, *, tools: bool = True) -> str:
    """The engine's families, then the tool-parser counter (which the server puts after the HTTP part)."""
    m = metrics or SimMetrics()
    text = MetricsText(dialect, "tiny", CACHE_INFO)
    body = text.render(m, None, tool_parser=tools, requests=RequestMetrics(2048))
    if tools:
        text.tool_counter(m)
        body += text.text()
    return body


def headers(text: str) -> list[str]:
    """`# HELP` and `# TYPE` lines of the vllm:* families, in order."""
    return [line for line in text.splitlines() if re.match(r"# (HELP|TYPE) vllm:", line)]


def test_every_family_of_the_real_page_with_its_type_and_help_in_its_order() -> None:
    assert headers(page()) == headers(REAL)


def sample_labels(text: str) -> dict[str, set[tuple[str, ...]]]:
    """Each family's samples by their label names (not values): what a query can select on."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("vllm:"):
            for sample in family.samples:
                found.setdefault(sample.name, set()).add(tuple(sorted(sample.labels)))
    return found


def test_every_sample_carries_the_real_pages_labels() -> None:
    real, sim = sample_labels(REAL), sample_labels(page())
    info = "vllm:cache_config_info"  # a selection of CacheConfig's fields, each one vLLM's
    assert {k: v for k, v in sim.items() if k != info} == {k: v for k, v in real.items() if k != info}
    (sim_info,), (real_info,) = sim.pop(info), real.pop(info)
    assert set(sim_info) < set(real_info)


def test_the_labels_say_engine_zero_and_the_served_model() -> None:
    line = next(line for line in page().splitlines() if line.startswith("vllm:num_requests_running{"))
    assert line == 'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0'


def value(text: str, sample: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {sample} {labels}")


def test_the_counters_say_what_was_served() -> None:
    m = SimMetrics(
        running=2, waiting=1, kv_usage=0.25, prompt_tokens=120, generation_tokens=716, preemptions=3
    )
    m.prefix_queries, m.prefix_hits = 120, 96
    m.success["length"], m.success["stop"] = 7, 2
    text = page(metrics=m)
    assert value(text, "vllm:generation_tokens_total") == 716.0
    assert value(text, "vllm:prompt_tokens_total") == 120.0
    assert value(text, "vllm:prefix_cache_hits_total") == 96.0
    assert value(text, "vllm:num_preemptions_total") == 3.0
    assert value(text, "vllm:request_success_total", finished_reason="length") == 7.0
    assert value(text, "vllm:request_success_total", finished_reason="stop") == 2.0
    assert value(text, "vllm:num_requests_waiting_by_reason", reason="capacity") == 1.0
    assert value(text, "vllm:kv_cache_usage_perc") == 0.25


def test_the_sleep_gauges_of_an_awake_engine() -> None:
    text = page()
    states = {
        state: value(text, "vllm:engine_sleep_state", sleep_state=state)
        for state in ("awake", "weights_offloaded", "discard_all")
    }
    assert states == {"awake": 1.0, "weights_offloaded": 0.0, "discard_all": 0.0}


def test_the_real_page_counted_the_same_tokens_the_same_way() -> None:
    """The recorded run's figures read through the same names: what the watch and the bench read."""
    assert value(REAL, "vllm:generation_tokens_total") == 716.0
    assert value(REAL, "vllm:num_requests_running") == 0.0


def test_033_keeps_total_and_created_in_one_counter_family() -> None:
    text = page(V033, tools=False)
    types = [line for line in headers(text) if line.startswith("# TYPE")]
    assert "# TYPE vllm:generation_tokens counter" in types
    assert not any(t.endswith("_created gauge") or "_total counter" in t for t in types)
    lines = text.splitlines()
    at = lines.index("# TYPE vllm:generation_tokens counter")
    assert lines[at + 1].startswith('vllm:generation_tokens_total{engine="0",model_name="tiny"} ')
    assert lines[at + 2].startswith('vllm:generation_tokens_created{engine="0",model_name="tiny"} ')


def test_033_has_none_of_026s_estimated_or_by_reason_families() -> None:
    names = {line.split()[2] for line in headers(page(V033, tools=False))}
    assert not {n for n in names if n.startswith(("vllm:estimated_", "vllm:num_requests_waiting_by_reason"))}
    assert "vllm:kv_cache_usage_perc" in names and "vllm:inter_token_latency_seconds" in names


def test_without_a_tool_parser_there_is_no_tool_counter() -> None:
    assert not any("tool_call_parser_invocations" in line for line in headers(page(tools=False)))
