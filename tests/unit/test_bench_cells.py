"""A cell's judgement from its rounds (launcher/bench/cells.py), on scripted streams: the times are
given, so what chk comes to and which trap it flags is exact, whatever the host's load."""

from __future__ import annotations

import pytest

from launcher.bench.cells import CellSummary, RoundResult, judge
from launcher.bench.checks import Flag
from launcher.bench.server_metrics import MetricsDelta
from tests.scripted_bench import failed, one_round, request


def cell_of(
    *rounds: RoundResult, concurrency: int = 4, signatures: list[tuple[str, str]] | None = None
) -> CellSummary:
    sigs = signatures if signatures is not None else [(f"p{i}", str(i)) for i in range(4)]
    return judge("short", concurrency, rounds, signatures=sigs, reasoning=False)


def flags_of(summary: CellSummary) -> set[Flag]:
    return {f.flag for f in summary.findings}


def test_four_requests_served_one_after_another_show_chk_4_and_are_flagged_queued() -> None:
    # one slot: each request decodes 10 tokens in 0.1 s at 100 tok/s, the next starts when it ends
    serial = [request(0.11 * k) for k in range(4)]  # each ends 0.111 s after its send
    summary = cell_of(one_round(serial))
    total = summary.value("total_tok_s")
    assert summary.value("decode_tok_s") == pytest.approx(100.0)
    assert total is not None and total == pytest.approx(40 / (0.33 + 0.111))
    assert summary.chk == pytest.approx(100 * 4 / total)
    assert summary.chk is not None and summary.chk > 3.5 and Flag.QUEUED in flags_of(summary)
    message = next(f.message for f in summary.findings if f.flag is Flag.QUEUED)
    assert message.startswith(f"chk {summary.chk:.2f} at c4")


def test_four_requests_decoding_side_by_side_have_chk_one_and_no_flag() -> None:
    together = [request(0.0) for _ in range(4)]
    summary = cell_of(one_round(together))
    assert summary.chk == pytest.approx(400 / (40 / 0.111), rel=1e-9)
    assert summary.chk is not None and summary.chk < 1.5 and Flag.QUEUED not in flags_of(summary)


def test_one_user_is_never_queued_whatever_chk_says() -> None:
    lonely = [request(0.0, concurrency=1)]
    idle_round = RoundResult(1, tuple(lonely), 10.0, MetricsDelta())  # a wall far longer than the decode
    summary = cell_of(idle_round, concurrency=1, signatures=[("p0", "0")])
    assert summary.chk is not None and summary.chk > 1.5
    assert Flag.QUEUED not in flags_of(summary)


def test_the_cell_value_is_the_median_of_its_rounds_and_their_spread_is_kept() -> None:
    rounds = [one_round([request(0.0, step_s=step, round_=i) for _ in range(4)], i) for i, step in
              ((1, 0.010), (2, 0.0125), (3, 0.020))]  # fmt: skip
    summary = cell_of(*rounds)
    assert summary.per_round("decode_tok_s") == pytest.approx([100.0, 80.0, 50.0])
    assert summary.value("decode_tok_s") == pytest.approx(80.0)
    data = summary.as_json()
    assert data["spread"]["decode_tok_s"] == pytest.approx((100 - 50) / 80)
    assert [r["round"] for r in data["per_round"]] == [1, 2, 3]
    assert Flag.ROUNDS_DISAGREE in flags_of(summary)  # throughput moved with the decode rate


def test_rounds_that_agree_raise_no_disagreement() -> None:
    rounds = [one_round([request(0.0, round_=i) for _ in range(4)], i) for i in (1, 2, 3)]
    summary = cell_of(*rounds)
    assert summary.as_json()["spread"]["total_tok_s"] == pytest.approx(0.0)
    assert flags_of(summary) == set()


def test_a_slow_first_round_is_flagged_not_warm() -> None:
    slow_first = one_round([request(0.0, first_s=0.300) for _ in range(4)], 1)
    warm = [one_round([request(0.0, round_=i) for _ in range(4)], i) for i in (2, 3)]
    summary = cell_of(slow_first, *warm)
    assert Flag.ROUND1_SLOW in flags_of(summary)
    assert summary.per_round("ttft_s") == pytest.approx([0.300, 0.020, 0.020])


def test_failed_requests_are_counted_apart_and_flagged_with_an_example() -> None:
    summary = cell_of(one_round([request(0.0), request(0.0), failed(0.0)]))
    data = summary.as_json()
    assert data["errors"] == 1 and data["requests"] == 3 and data["completed"] == 2 and data["failed"] == 1
    message = next(f.message for f in summary.findings if f.flag is Flag.ERRORS)
    assert message == "1/3 requests failed, e.g. HTTP 500: engine dead"
    assert data["total_output_tokens"] == 20  # only what the successful requests returned


def test_streams_without_usage_count_events_and_say_so() -> None:
    summary = cell_of(one_round([request(0.0, usage=False) for _ in range(4)]))
    assert all(not r.tokens_from_usage and r.output_tokens == len(r.event_times) for r in summary.records)
    assert Flag.NO_USAGE in flags_of(summary)


def test_tokens_the_server_made_for_someone_else_are_other_traffic() -> None:
    ours = 40  # four requests of ten tokens
    crowded = cell_of(one_round([request(0.0) for _ in range(4)], delta=MetricsDelta(generation_tokens=400)))
    quiet = cell_of(one_round([request(0.0) for _ in range(4)], delta=MetricsDelta(generation_tokens=ours)))
    assert Flag.OTHER_TRAFFIC in flags_of(crowded) and Flag.OTHER_TRAFFIC not in flags_of(quiet)


def test_answers_without_text_are_empty_by_how_they_ended() -> None:
    blank = [request(0.0, words=[], finish="length") for _ in range(2)] + [request(0.0) for _ in range(2)]
    summary = cell_of(one_round(blank))
    assert summary.as_json()["empty_answers"] == 2
    message = next(f.message for f in summary.findings if f.flag is Flag.EMPTY_ANSWERS)
    assert message == "2/4 answers empty: 2 spent all of max_tokens"


def test_one_prompt_with_one_sampling_is_one_sequence() -> None:
    summary = cell_of(one_round([request(0.0) for _ in range(4)]), signatures=[("p0", "greedy")] * 4)
    assert Flag.SAME_SEQUENCE in flags_of(summary)


def test_a_looping_answer_is_scored_degenerate() -> None:
    loop = ["again", "and"] * 20
    summary = cell_of(one_round([request(0.0, tokens=40, words=loop) for _ in range(4)]))
    data = summary.as_json()
    assert data["degenerate_answers"] == 4 and data["answer_score_median"] < 0.2
    assert Flag.DEGENERATE in flags_of(summary)


def test_the_summary_speaks_ms_for_latencies_and_vllm_bench_serve_names() -> None:
    summary = cell_of(one_round([request(0.0) for _ in range(4)]))
    data = summary.as_json()
    assert data["itl_median_ms"] == pytest.approx(10.0) and data["ttft_s"] == pytest.approx(0.02)
    assert data["median_ttft_ms"] == pytest.approx(20.0) and data["median_itl_ms"] == pytest.approx(10.0)
    # TPOT = (e2e - ttft) / (tokens - 1): (0.111 - 0.02) / 9
    assert data["median_tpot_ms"] == pytest.approx((0.111 - 0.02) / 9 * 1000)
    assert data["output_throughput"] == pytest.approx(40 / 0.111) == data["total_tok_s"]
    assert data["total_token_throughput"] == pytest.approx((40 + 80) / 0.111)
    assert data["finish_reasons"] == {"stop": 4} and data["rounds"] == 1


def test_a_round_without_wall_time_or_without_a_success_has_no_throughput() -> None:
    records = (request(0.0), request(0.0))
    assert RoundResult(1, records, 0.0, MetricsDelta()).total_tok_s is None
    assert RoundResult(1, records, 0.5, MetricsDelta()).total_tok_s == pytest.approx(20 / 0.5)


def test_think_share_is_reasoning_tokens_over_all_output_of_successful_requests() -> None:
    summary = cell_of(one_round([request(0.0), request(0.0), failed(0.0)]))
    assert summary.think_share == 0.0  # no reasoning in the scripted answers
    assert cell_of(one_round([failed(0.0)])).think_share is None  # no output at all: no share


def test_the_cell_delta_is_the_sum_of_its_rounds_and_unknown_if_any_round_lacks_it() -> None:
    one = one_round([request(0.0)], 1, MetricsDelta(prefix_queries=100, prefix_hits=10))
    two = one_round([request(0.0)], 2, MetricsDelta(prefix_queries=300, prefix_hits=290))
    summary = cell_of(one, two)
    assert summary.delta.hit_rate == pytest.approx(300 / 400)  # pooled tokens, not the mean of 10 % and 97 %
    blind = one_round([request(0.0)], 3, MetricsDelta())
    assert cell_of(one, blind).delta.hit_rate is None  # a scrape that failed: no total to speak of


def test_requests_and_rounds_are_counted_over_the_whole_cell() -> None:
    rounds = [one_round([request(0.0, round_=i) for _ in range(3)], i) for i in (1, 2)]
    data = cell_of(*rounds).as_json()
    assert (data["requests"], data["rounds"], data["completed"]) == (6, 2, 6)
    assert data["total_output_tokens"] == 60 and data["per_round"][1]["output_tokens"] == 30
