"""The trap detectors, on the numbers from the field notes where there are some."""

from __future__ import annotations

from launcher.bench import checks
from launcher.bench.checks import Flag
from launcher.bench.server_metrics import MetricsDelta, MetricsSnapshot


def test_identical_greedy_copies_are_one_sequence() -> None:
    same = [("p0", "greedy")] * 5
    found = checks.same_sequence(same, ["x"] * 5)
    assert found is not None and found.flag == Flag.SAME_SEQUENCE and "5 times" in found.message
    mixed = [(f"p{i}", "greedy") for i in range(5)]
    assert checks.same_sequence(mixed, [f"answer {i}" for i in range(5)]) is None


def test_identical_answers_are_flagged_even_when_inputs_differ() -> None:
    found = checks.same_sequence([("p0", "1"), ("p0", "2"), ("p0", "3")], ["same"] * 3)
    assert found is not None and "identical text" in found.message


def test_cold_proof_uses_the_hit_delta() -> None:
    cold, proof = checks.cold_proof(MetricsDelta(prefix_queries=64000, prefix_hits=0), 3)
    assert cold is None and proof.startswith("cold proven: 0 of 64000")
    # the field note: 43K "cold" prompt containing the 21K one -> about half of it was a hit
    warm, _ = checks.cold_proof(MetricsDelta(prefix_queries=43218, prefix_hits=21600), 1)
    assert warm is not None and warm.flag == Flag.COLD_NOT_COLD
    unknown, proof = checks.cold_proof(MetricsDelta(), 3)
    assert unknown is not None and unknown.flag == Flag.COLD_UNPROVEN and "not proven" in proof


def test_degenerate_cell_needs_a_quarter_of_answers() -> None:
    assert checks.degenerate([0.98, 0.97, 0.1, 0.99, 0.95], 1) is None
    found = checks.degenerate([0.02, 0.03, 0.99, 0.98], 2)
    assert found is not None and found.flag == Flag.DEGENERATE
    assert checks.degenerate([None, None], 0) is None


def test_empty_answers_and_the_reasoning_budget_warning() -> None:
    # the field note: 4 of 6 answers blank at max_tokens 200 on a reasoning model
    found = checks.empty_answers(["length"] * 4, 6, reasoning=True)
    assert found is not None and "4/6" in found.message and "reasoning" in found.message
    assert found.message == "4/6 answers empty: 4 spent all of max_tokens on reasoning"
    # a model that ends its turn after reasoning: more max_tokens would not help, so it is not blamed
    ended = checks.empty_answers(["stop", "length", "stop"], 8, reasoning=True)
    assert ended is not None and ended.message == (
        "3/8 answers empty: 1 spent all of max_tokens on reasoning; 2 ended (stop) with no answer after reasoning"
    )
    plain = checks.empty_answers(["stop", None], 4, reasoning=False)
    assert plain is not None and plain.message == (
        "2/4 answers empty: 1 ended (none) with no answer; 1 ended (stop) with no answer"
    )
    warn = checks.small_max_tokens(True, 200)
    assert warn is not None and warn.flag == Flag.SMALL_MAX_TOKENS
    assert checks.small_max_tokens(True, 1024) is None and checks.small_max_tokens(False, 200) is None
    assert checks.empty_answers([], 6, reasoning=True) is None


def test_round_one_outlier_after_a_restart() -> None:
    # the field note: cold TTFT 0.43 s on the first run, 0.16 s on every other
    found = checks.round1_slow([0.43, 0.16, 0.16], [120.0, 121.0, 120.5])
    assert found is not None and found.flag == Flag.ROUND1_SLOW
    slow_decode = checks.round1_slow([0.16, 0.16, 0.16], [14.6, 19.0, 19.2])
    assert slow_decode is not None
    assert checks.round1_slow([0.17, 0.16, 0.16], [120.0, 121.0, 120.5]) is None
    assert checks.round1_slow([0.43, 0.16], [1.0, 1.0]) is None  # needs rounds 2..n to compare


def test_fresh_server_from_uptime_or_no_requests_served() -> None:
    fresh = MetricsSnapshot(1000.0, {"process_start_time_seconds": 950.0, "vllm:request_success_total": 40.0})
    assert checks.fresh_server(fresh) is not None
    untouched = MetricsSnapshot(
        10000.0, {"process_start_time_seconds": 100.0, "vllm:request_success_total": 0.0}
    )
    found = checks.fresh_server(untouched)
    assert found is not None and "no request" in found.message
    settled = MetricsSnapshot(
        10000.0, {"process_start_time_seconds": 100.0, "vllm:request_success_total": 9.0}
    )
    assert checks.fresh_server(settled) is None
    five_minutes_up = MetricsSnapshot(
        1300.0, {"process_start_time_seconds": 1000.0, "vllm:request_success_total": 9.0}
    )
    assert checks.fresh_server(five_minutes_up) is None  # it served: warm, whatever the clock says
    just_up = MetricsSnapshot(
        1060.0, {"process_start_time_seconds": 1000.0, "vllm:request_success_total": 9.0}
    )
    assert checks.fresh_server(just_up) is not None  # a minute up: only the gates' requests went through


def test_other_traffic_when_the_server_generated_more_than_we_received() -> None:
    assert checks.other_traffic(MetricsDelta(generation_tokens=1000.0), 1000) is None
    found = checks.other_traffic(MetricsDelta(generation_tokens=3000.0), 1000)
    assert found is not None and found.flag == Flag.OTHER_TRAFFIC


def test_usage_missing_and_errors() -> None:
    assert checks.no_usage(0, 8) is None
    assert checks.no_usage(3, 8) is not None
    found = checks.errors(2, 8, "HTTP 400: too long")
    assert found is not None and "HTTP 400" in found.message
    assert checks.rounds_disagree("total", 0.3) is not None and checks.rounds_disagree("total", 0.05) is None
