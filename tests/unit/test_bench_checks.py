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


# ---- each detector at its threshold and just past it ------------------------------------------------


def test_queued_starts_just_above_its_threshold_and_from_two_users() -> None:
    assert checks.queued(checks.CHK_QUEUED, 8) is None  # exactly 1.5: still decoding enough
    assert checks.queued(checks.CHK_QUEUED + 0.001, 8) is not None
    assert checks.queued(4.0, 2) is not None and checks.queued(None, 8) is None
    found = checks.queued(4.0, 8)
    assert found is not None and found.message.startswith("chk 4.00 at c8: only about 1/4.0 of the wall time")


def test_chk_needs_both_rates_to_be_non_zero() -> None:
    assert checks.chk(0.0, 8, 100.0) is None and checks.chk(25.0, 8, None) is None
    assert checks.chk(25.0, 8, 100.0) == 2.0


def test_cold_is_proven_up_to_five_percent_hits_and_not_one_token_more() -> None:
    at_limit, proof = checks.cold_proof(MetricsDelta(prefix_queries=1000, prefix_hits=50), 2)
    assert at_limit is None
    assert proof == "cold proven: 50 of 1000 prompt tokens of 2 cold request(s) hit the prefix cache (5.0%)"
    over, proof = checks.cold_proof(MetricsDelta(prefix_queries=1000, prefix_hits=51), 2)
    assert over is not None and over.flag == Flag.COLD_NOT_COLD and "(5.1%)" in proof
    assert (
        over.message.startswith("cold was not cold: 51 of 1000")
        and "nested or repeated prefix" in over.message
    )


def test_cold_requests_that_never_reached_the_cache_prove_nothing() -> None:
    found, proof = checks.cold_proof(MetricsDelta(prefix_queries=0, prefix_hits=0), 3)
    assert found is not None and found.flag == Flag.COLD_UNPROVEN
    assert proof == "cold not measured: none of the 3 cold request(s) reached the prefix cache (failed?)"
    half, _ = checks.cold_proof(MetricsDelta(prefix_queries=100), 3)  # a hits counter missing
    assert half is not None and half.flag == Flag.COLD_UNPROVEN


def test_one_request_is_never_one_sequence_printed_many_times() -> None:
    assert checks.same_sequence([("p0", "greedy")], ["x"]) is None
    two = checks.same_sequence([("p0", "greedy")] * 2, ["a", "b"])
    assert two is not None and two.message.startswith("one sequence printed 2 times: all 2 requests")


def test_identical_answers_count_only_answers_that_have_text() -> None:
    distinct = [("p0", "1"), ("p1", "2"), ("p2", "3")]
    found = checks.same_sequence(distinct, ["", "same", "same"])
    assert found is not None and found.message == (
        "all 2 answers are identical text: one sequence printed 2 times"
    )
    assert checks.same_sequence(distinct, ["", "", "alone"]) is None  # one answer is not a repetition
    assert checks.same_sequence(distinct, ["", "", ""]) is None  # blanks are empty-answers' business


def test_degenerate_at_exactly_a_quarter_of_the_scored_answers() -> None:
    found = checks.degenerate([0.1, 0.95, 0.96, 0.97], 1)
    assert found is not None and found.message.startswith("1/4 answers degenerate")
    assert "as low as 0.10" in found.message
    assert checks.degenerate([0.1, 0.95, 0.96, 0.97, 0.98], 1) is None  # 20 %
    # unscored answers (too short) are not in the denominator
    assert checks.degenerate([0.1, None, None, None], 1) is not None


def test_the_reasoning_budget_warning_stops_at_1024_tokens() -> None:
    found = checks.small_max_tokens(True, checks.REASONING_MIN_TOKENS - 1)
    assert found is not None and found.message.startswith("reasoning model with max_tokens 1023 < 1024")
    assert checks.small_max_tokens(True, checks.REASONING_MIN_TOKENS) is None


def test_round_one_ttft_must_be_more_than_one_and_a_half_times_the_rest() -> None:
    decode = [100.0, 100.0, 100.0]
    assert checks.round1_slow([0.300, 0.200, 0.200], decode) is None  # exactly 1.5x
    found = checks.round1_slow([0.302, 0.200, 0.200], decode)
    assert found is not None and found.message.startswith("round 1 TTFT 0.302s vs 0.200s in later rounds")


def test_round_one_ttft_must_also_be_more_than_20_ms_slower() -> None:
    decode = [100.0, 100.0, 100.0]
    assert checks.round1_slow([0.029, 0.010, 0.010], decode) is None  # 2.9x, but only 19 ms
    assert checks.round1_slow([0.031, 0.010, 0.010], decode) is not None


def test_the_later_rounds_are_summarised_by_their_median() -> None:
    # rounds 2..4 have median 0.3 s, and 0.5 s is 1.67x that; against their mean (0.467 s) or their
    # max (0.9 s) round 1 would not stand out: a wrong centre changes the verdict
    found = checks.round1_slow([0.5, 0.2, 0.3, 0.9], [1.0, 1.0, 1.0, 1.0])
    assert found is not None and "vs 0.300s" in found.message


def test_round_one_decode_must_be_below_four_fifths_of_the_rest() -> None:
    ttft = [0.1, 0.1, 0.1]
    assert checks.round1_slow(ttft, [80.0, 100.0, 100.0]) is None  # exactly 0.8x
    found = checks.round1_slow(ttft, [79.9, 100.0, 100.0])
    assert found is not None and found.message.startswith("round 1 decode 79.9 tok/s vs 100.0 later")
    assert checks.round1_slow(ttft, [None, 100.0, 100.0]) is None  # round 1 had no decode figure


def test_a_fresh_server_is_judged_by_requests_served_before_uptime() -> None:
    def snap(up_s: float | None, served: float | None) -> MetricsSnapshot:
        samples = {} if up_s is None else {"process_start_time_seconds": 10_000.0 - up_s}
        if served is not None:
            samples["vllm:request_success_total"] = served
        return MetricsSnapshot(10_000.0, samples)

    assert checks.fresh_server(snap(checks.FRESH_UPTIME_S, 5.0)) is None  # exactly two minutes up
    young = checks.fresh_server(snap(checks.FRESH_UPTIME_S - 1, 5.0))
    assert young is not None and young.message.startswith("the server started 119s ago")
    idle = checks.fresh_server(snap(None, 0.0))
    assert idle is not None and "(up unknown time)" in idle.message
    assert checks.fresh_server(snap(None, None)) is None  # /metrics said nothing: no claim either way


def test_rounds_disagree_beyond_fifteen_percent_only() -> None:
    assert checks.rounds_disagree("output throughput", checks.SPREAD_WARN) is None
    found = checks.rounds_disagree("output throughput", 0.2)
    assert found is not None
    assert found.message == "output throughput differs by 20% between rounds: noisy, add --rounds"
    assert checks.rounds_disagree("x", None) is None


def test_other_traffic_allows_five_percent_and_sixteen_tokens_of_slack() -> None:
    # 1000 received: up to 1000 x 1.05 + 16 = 1066 generated is still ours
    assert checks.other_traffic(MetricsDelta(generation_tokens=1066.0), 1000) is None
    found = checks.other_traffic(MetricsDelta(generation_tokens=1067.0), 1000)
    assert found is not None and found.message.startswith(
        "the server generated 1067 tokens while we received 1000"
    )
    assert checks.other_traffic(MetricsDelta(generation_tokens=16.0), 0) is None
    assert checks.other_traffic(MetricsDelta(generation_tokens=17.0), 0) is not None
    assert checks.other_traffic(MetricsDelta(), 0) is None  # no counter: nothing to compare


def test_errors_and_missing_usage_say_how_many_of_how_many() -> None:
    plain = checks.errors(2, 8, None)
    assert plain is not None and plain.message == "2/8 requests failed"
    missing = checks.no_usage(3, 8)
    assert missing is not None and missing.message.startswith("3/8 streams had no usage chunk")
    assert missing.as_json() == {"flag": "no-usage", "message": missing.message}
