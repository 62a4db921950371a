"""/metrics parsing and counter deltas: only what changed during the run counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.bench import checks
from launcher.bench.server_metrics import PREFIX_QUERIES, MetricsDelta, MetricsSnapshot, parse_text

# Shape of vLLM 0.33's exposition (vllm-facts.md §8): counters with `_total` and `_created`, two engines.
BEFORE = """\
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="fable"} 100000.0
vllm:prefix_cache_queries_total{engine="1",model_name="fable"} 50000.0
vllm:prefix_cache_queries_created{engine="0",model_name="fable"} 1790000000.5
vllm:prefix_cache_hits_total{engine="0",model_name="fable"} 80000.0
vllm:prefix_cache_hits_total{engine="1",model_name="fable"} 40000.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="fable"} 1000.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="fable"} 800.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="fable"} 12.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="fable"} 3.0
vllm:generation_tokens_total{engine="0",model_name="fable"} 5000.0
process_start_time_seconds 1789999990.0
"""
AFTER = """\
vllm:prefix_cache_queries_total{engine="0",model_name="fable"} 110000.0
vllm:prefix_cache_queries_total{engine="1",model_name="fable"} 60000.0
vllm:prefix_cache_hits_total{engine="0",model_name="fable"} 80500.0
vllm:prefix_cache_hits_total{engine="1",model_name="fable"} 40500.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="fable"} 2000.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="fable"} 1530.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="fable"} 20.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="fable"} 3.0
vllm:generation_tokens_total{engine="0",model_name="fable"} 6000.0
"""


def test_label_sets_are_summed() -> None:
    samples = parse_text(BEFORE)
    assert samples["vllm:prefix_cache_queries_total"] == 150000.0
    assert samples["vllm:request_success_total"] == 15.0


def test_rates_come_from_deltas_not_cumulative_totals() -> None:
    before = MetricsSnapshot(1790000100.0, parse_text(BEFORE))
    after = MetricsSnapshot(1790000200.0, parse_text(AFTER))
    delta = before.delta(after)
    # cumulative would say 80 % hits and 80 % acceptance; the run itself had 5 % and 73 %
    assert delta.hit_rate == pytest.approx(1000 / 20000)
    assert delta.acceptance == pytest.approx(730 / 1000)
    assert delta.requests == 8.0 and delta.generation_tokens == 1000.0


def test_missing_counters_give_none_not_zero() -> None:
    before = MetricsSnapshot(0.0, parse_text("vllm:prefix_cache_queries_total 10\n"))
    after = MetricsSnapshot(1.0, parse_text("vllm:prefix_cache_queries_total 20\n"))
    delta = before.delta(after)
    assert delta.hit_rate is None and delta.acceptance is None
    assert not before.has_spec_decode


def test_older_prefix_cache_names_are_read() -> None:
    old = MetricsSnapshot(
        0.0, parse_text("vllm:gpu_prefix_cache_queries_total 10\nvllm:gpu_prefix_cache_hits_total 5\n")
    )
    new = MetricsSnapshot(
        1.0, parse_text("vllm:gpu_prefix_cache_queries_total 30\nvllm:gpu_prefix_cache_hits_total 25\n")
    )
    assert old.delta(new).hit_rate == pytest.approx(1.0)


def test_uptime_from_process_start_else_oldest_created() -> None:
    snap = MetricsSnapshot(1790000100.0, parse_text(BEFORE))
    assert snap.uptime_s == pytest.approx(110.0)
    only_created = MetricsSnapshot(
        1790000100.0, parse_text(BEFORE.replace("process_start_time_seconds", "#"))
    )
    assert only_created.uptime_s == pytest.approx(99.5)
    assert MetricsSnapshot(5.0).uptime_s is None


def test_deltas_add_over_rounds() -> None:
    a = MetricsSnapshot(0.0, parse_text(BEFORE))
    b = MetricsSnapshot(1.0, parse_text(AFTER))
    total = a.delta(b).plus(a.delta(b))
    assert total.prefix_queries == 40000.0 and total.hit_rate == pytest.approx(0.05)


DATA = Path(__file__).resolve().parents[1] / "data" / "bench"


def test_real_vllm_metrics_give_the_runs_deltas() -> None:
    """Recorded from vLLM 0.26.0 around two bench runs (tests/data/bench/README.md)."""
    fresh = parse_text((DATA / "vllm-0.26.0-metrics-fresh.txt").read_text(encoding="utf-8"))
    after = parse_text((DATA / "vllm-0.26.0-metrics-after.txt").read_text(encoding="utf-8"))
    before = MetricsSnapshot(fresh["process_start_time_seconds"] + 60.0, fresh)
    assert before.has_prefix_cache and before.has_spec_decode
    assert before.uptime_s == pytest.approx(60.0)
    assert before.requests_served == 0.0 and checks.fresh_server(before) is not None
    delta = before.delta(MetricsSnapshot(0.0, after))
    assert delta.acceptance == pytest.approx(1.0)  # 310/310: greedy copies of one prompt
    assert (
        delta.prefix_queries
        == after["vllm:prefix_cache_queries_total"] - fresh["vllm:prefix_cache_queries_total"]
    )
    assert 0.5 < (delta.hit_rate or 0) < 1.0
    assert (
        delta.generation_tokens
        == after["vllm:generation_tokens_total"] - fresh["vllm:generation_tokens_total"]
    )


def test_label_values_holding_braces_and_quotes_are_counted() -> None:
    # the hand-written parser dropped these: its regex ended the label set at the first `}`
    text = (
        "# TYPE vllm:generation_tokens counter\n"
        'vllm:generation_tokens_total{engine="0",model_name="m{x}y"} 5.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="q\\"}\\"z"} 7.0\n'
    )
    assert parse_text(text)["vllm:generation_tokens_total"] == 12.0


def test_one_malformed_line_loses_only_itself() -> None:
    text = (
        "vllm:prompt_tokens_total 10\n"
        'vllm:broken{engine="0" not a sample\n'
        'vllm:generation_tokens_total{engine="0"} 3\n'
    )
    assert parse_text(text) == {"vllm:prompt_tokens_total": 10.0, "vllm:generation_tokens_total": 3.0}


def test_the_real_0_26_page_reads_whole() -> None:
    page = Path(__file__).resolve().parents[1] / "data" / "bench" / "vllm-0.26.0-metrics-after.txt"
    samples = parse_text(page.read_text(encoding="utf-8"))
    assert samples["vllm:spec_decode_num_accepted_tokens_total"] == 310.0
    assert samples["vllm:prefix_cache_queries_total"] > 0 and "process_start_time_seconds" in samples


def test_a_counter_missing_on_either_side_of_a_sum_makes_the_sum_unknown() -> None:
    known = MetricsDelta(prefix_queries=10.0, generation_tokens=5.0)
    total = known.plus(MetricsDelta(prefix_queries=30.0))
    assert total.prefix_queries == 40.0 and total.generation_tokens is None  # never 5 + "nothing"


def test_rates_need_a_positive_denominator() -> None:
    assert MetricsDelta(prefix_queries=0.0, prefix_hits=0.0).hit_rate is None
    assert MetricsDelta(draft_tokens=0.0, accepted_tokens=0.0).acceptance is None
    assert MetricsDelta(draft_tokens=40.0, accepted_tokens=30.0).acceptance == pytest.approx(0.75)


def test_the_current_counter_name_is_read_before_the_old_one() -> None:
    both = MetricsSnapshot(
        0.0, {"vllm:prefix_cache_queries_total": 7.0, "vllm:gpu_prefix_cache_queries_total": 99.0}
    )
    assert both.first(PREFIX_QUERIES) == 7.0 and both.has_prefix_cache


def test_a_clock_behind_the_servers_start_gives_zero_uptime_not_negative() -> None:
    assert MetricsSnapshot(100.0, {"process_start_time_seconds": 160.0}).uptime_s == 0.0


def test_created_stamps_take_the_earliest_and_other_samples_are_summed() -> None:
    text = (
        'vllm:request_success_created{engine="0"} 500.0\n'
        'vllm:request_success_created{engine="1"} 400.0\n'
        'vllm:request_success_total{engine="0"} 2.0\n'
        'vllm:request_success_total{engine="1"} NaN\n'
    )
    samples = parse_text(text)
    assert samples["vllm:request_success_created"] == 400.0 and samples["vllm:request_success_total"] == 2.0
    assert MetricsSnapshot(1000.0, samples).uptime_s == 600.0  # the oldest counter: the server's start
