"""Issue 42's device run (scripts/real-vllm/check-i42.sh) reads /metrics and tells which series moved
during a long prefill: the helpers in i42_series.py, on vLLM 0.26.0's own /metrics page
(tests/data/real-vllm-0.26/eager/) and on hand-made polls."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO

SCRIPTS = REPO / "scripts" / "real-vllm"
EAGER = REPO / "tests" / "data" / "real-vllm-0.26" / "eager"


@pytest.fixture(scope="module")
def series() -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module("i42_series")
    finally:
        sys.path.remove(str(SCRIPTS))


def poll(t: float, **values: float) -> dict[str, Any]:
    return {"t": t, "values": {name.replace("__", ":"): v for name, v in values.items()}}


def test_the_six_series_are_read_from_a_real_page(series: ModuleType) -> None:
    found = series.read_series((EAGER / "metrics-after.txt").read_text())
    assert found == {
        "vllm:num_requests_running": 0.0,
        "vllm:num_requests_waiting": 0.0,  # not summed with num_requests_waiting_by_reason
        "vllm:kv_cache_usage_perc": 0.0,
        "vllm:prompt_tokens_total": 658.0,
        "vllm:generation_tokens_total": 716.0,
        "vllm:iteration_tokens_total_count": 716.0,
    }


def test_label_sets_are_summed_and_bad_lines_skipped(series: ModuleType) -> None:
    text = "\n".join(
        [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            'vllm:num_requests_running{engine="0",model_name="m"} 2.0',
            'vllm:num_requests_running{engine="1",model_name="m"} 3.0',
            'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 9.0',
            'vllm:kv_cache_usage_perc{engine="0"} NaN',
            "vllm:prompt_tokens_total garbage",
            "vllm:generation_tokens_total 7",
        ]
    )
    assert series.read_series(text) == {
        "vllm:num_requests_running": 5.0,
        "vllm:generation_tokens_total": 7.0,
    }


def test_moved_counts_changes_inside_the_window_against_the_poll_before_it(series: ModuleType) -> None:
    polls = [
        poll(9.0, vllm__kv_cache_usage_perc=0.0, vllm__prompt_tokens_total=10, engine_core_cpu_s=1.0),
        poll(10.5, vllm__kv_cache_usage_perc=0.1, vllm__prompt_tokens_total=10, engine_core_cpu_s=1.2),
        poll(11.0, vllm__kv_cache_usage_perc=0.2, vllm__prompt_tokens_total=10, engine_core_cpu_s=1.4),
        poll(11.5, vllm__kv_cache_usage_perc=0.2, vllm__prompt_tokens_total=10, engine_core_cpu_s=1.4),
        poll(12.0, vllm__kv_cache_usage_perc=0.3, vllm__prompt_tokens_total=4010, engine_core_cpu_s=1.6),
    ]
    seen = series.moved(polls, since=10.0, until=12.0)  # the first token at 12.0: its poll is after
    assert seen["vllm:kv_cache_usage_perc"] == {"changes": 2, "first_change_s": 0.5, "from": 0.0, "to": 0.2}
    assert seen["vllm:prompt_tokens_total"]["changes"] == 0
    assert seen["engine_core_cpu_s"]["changes"] == 2
    assert series.moving(seen) == ["engine_core_cpu_s", "vllm:kv_cache_usage_perc"]


def test_a_series_missing_from_some_polls_is_compared_where_it_was_read(series: ModuleType) -> None:
    polls = [poll(1.0, a=1.0), poll(2.0), poll(3.0, a=1.0), poll(4.0, a=2.0)]
    seen = series.moved(polls, since=1.5, until=5.0)
    assert seen["a"]["changes"] == 1
    assert seen["a"]["first_change_s"] == 2.5
    assert series.moved([], since=0.0, until=1.0) == {}


def test_spread_skips_unknown_values(series: ModuleType) -> None:
    assert series.spread([3.0, None, 1.0, 2.0]) == {"n": 3, "median": 2.0, "min": 1.0, "max": 3.0}
    assert series.spread([4.0, 1.0]) == {"n": 2, "median": 2.5, "min": 1.0, "max": 4.0}
    assert series.spread([None]) == {"n": 0, "median": None, "min": None, "max": None}
