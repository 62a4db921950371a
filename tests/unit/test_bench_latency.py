"""mean/median/p90/p99 of TTFT, TPOT, ITL and E2EL in ms, and tok/s, as `vllm bench serve` names them."""

from __future__ import annotations

import json

import pytest

from launcher.bench.exchange import Exchange, Phase, Tag
from launcher.bench.latency import vllm_bench_metrics
from launcher.bench.record import RequestRecord, build_record

TAG = Tag(Phase.TIMED, "short", 1, 1, 0)


def reply(t_send: float, offsets: list[float], prompt: int, output: int, status: int = 200) -> RequestRecord:
    """A streamed answer: one content event per offset (s after send), then the usage chunk."""

    def chunk(body: dict[str, object]) -> bytes:
        return b"data: " + json.dumps({"id": "c", "model": "m", **body}).encode() + b"\n\n"

    events = [(t_send + 0.001, chunk({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}))]
    events += [
        (
            t_send + dt,
            chunk({"choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}]}),
        )
        for i, dt in enumerate(offsets)
    ]
    usage = {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}
    end = t_send + offsets[-1] + 0.001
    events.append((end, chunk({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"))
    return build_record(Exchange(TAG, "r", t_send, end, status, tuple(events) if status == 200 else ()))


def test_the_names_and_values_match_vllm_bench_serve_definitions() -> None:
    # two requests: TTFT 100 ms and 300 ms; gaps 10, 10 ms and 20, 40 ms; 3 tokens each
    a = reply(10.0, [0.100, 0.110, 0.120], prompt=50, output=3)
    b = reply(20.0, [0.300, 0.320, 0.360], prompt=70, output=3)
    m = vllm_bench_metrics([a, b], wall_s=2.0)
    assert m["completed"] == 2 and m["failed"] == 0
    assert m["mean_ttft_ms"] == pytest.approx(200.0)
    assert m["median_ttft_ms"] == pytest.approx(200.0)
    assert m["p90_ttft_ms"] == pytest.approx(280.0)  # numpy's linear interpolation
    assert m["p99_ttft_ms"] == pytest.approx(298.0)
    assert m["std_ttft_ms"] == pytest.approx(100.0)  # population std, as np.std
    # TPOT = (e2e - ttft) / (output - 1): (121 - 100) / 2 and (361 - 300) / 2
    assert m["mean_tpot_ms"] == pytest.approx((10.5 + 30.5) / 2)
    # ITL pools every gap between output events: 10, 10, 20, 40 ms
    assert m["mean_itl_ms"] == pytest.approx(20.0)
    assert m["median_itl_ms"] == pytest.approx(15.0)
    assert m["mean_e2el_ms"] == pytest.approx((121.0 + 361.0) / 2)
    assert m["output_throughput"] == pytest.approx(6 / 2.0)
    assert m["total_token_throughput"] == pytest.approx((6 + 120) / 2.0)
    assert m["request_throughput"] == pytest.approx(1.0)


def test_failed_requests_count_as_failed_and_never_as_zero_latency() -> None:
    failed = reply(10.0, [0.1], prompt=5, output=1, status=500)
    m = vllm_bench_metrics([failed], wall_s=1.0)
    assert (m["completed"], m["failed"]) == (0, 1)
    for key in ("mean_ttft_ms", "p99_itl_ms", "median_tpot_ms", "output_throughput"):
        assert m[key] is None, key  # vLLM prints 0.00 here, which reads as "instant"


def test_a_one_token_answer_has_a_ttft_but_no_tpot_and_no_itl() -> None:
    # TPOT divides by (output - 1): vLLM leaves one-token requests out of it, and so do we
    single = reply(5.0, [0.250], prompt=10, output=1)
    m = vllm_bench_metrics([single], wall_s=1.0)
    assert m["mean_ttft_ms"] == pytest.approx(250.0)
    assert m["mean_tpot_ms"] is None and m["median_tpot_ms"] is None
    assert m["mean_itl_ms"] is None and m["mean_e2el_ms"] == pytest.approx(251.0)


def test_itl_pools_every_gap_of_every_request_and_weights_long_answers_more() -> None:
    # A: four events, gaps 10, 10, 10 ms; B: two events, one gap of 70 ms
    a = reply(0.0, [0.05, 0.06, 0.07, 0.08], prompt=5, output=4)
    b = reply(1.0, [0.05, 0.12], prompt=5, output=2)
    m = vllm_bench_metrics([a, b], wall_s=2.0)
    assert m["mean_itl_ms"] == pytest.approx((10 + 10 + 10 + 70) / 4)  # not the mean of per-request means
    assert m["median_itl_ms"] == pytest.approx(10.0)
    assert m["p90_itl_ms"] == pytest.approx(10 + (70 - 10) * 0.7)  # rank 2.7 of 4 pooled gaps


def test_tpot_spreads_decode_time_over_the_tokens_after_the_first() -> None:
    # e2e 0.301 s, TTFT 0.1 s, 5 tokens: (301 - 100) / 4 ms per output token
    r = reply(0.0, [0.1, 0.15, 0.2, 0.25, 0.3], prompt=8, output=5)
    assert vllm_bench_metrics([r], wall_s=1.0)["mean_tpot_ms"] == pytest.approx(201.0 / 4)


def test_tpot_uses_the_usage_token_count_not_the_event_count() -> None:
    # spec decoding: 3 events carried 9 tokens, so decode time is shared by 8 tokens, not 2
    r = reply(0.0, [0.1, 0.2, 0.3], prompt=8, output=9)
    assert vllm_bench_metrics([r], wall_s=1.0)["mean_tpot_ms"] == pytest.approx((301.0 - 100.0) / 8)


def test_std_is_the_population_deviation_over_all_requests() -> None:
    records = [reply(float(i), [ttft], prompt=1, output=1) for i, ttft in enumerate((0.1, 0.2, 0.3))]
    m = vllm_bench_metrics(records, wall_s=3.0)
    assert m["std_ttft_ms"] == pytest.approx((20000 / 3) ** 0.5)  # pstdev, not the sample stdev 100
    assert m["median_ttft_ms"] == pytest.approx(200.0) and m["p99_ttft_ms"] == pytest.approx(298.0)


def test_failed_requests_are_counted_but_add_no_tokens_and_no_latency() -> None:
    ok = reply(0.0, [0.1, 0.2], prompt=30, output=2)
    bad = reply(1.0, [5.0], prompt=900, output=50, status=500)
    m = vllm_bench_metrics([ok, bad], wall_s=4.0)
    assert (m["completed"], m["failed"]) == (1, 1)
    assert (m["total_input_tokens"], m["total_output_tokens"]) == (30, 2)
    assert m["request_throughput"] == pytest.approx(0.25) and m["output_throughput"] == pytest.approx(0.5)
    assert m["mean_e2el_ms"] == pytest.approx(201.0)  # the failed request's 5 s is nobody's latency


def test_no_wall_time_means_no_rate_rather_than_a_division_by_zero() -> None:
    m = vllm_bench_metrics([reply(0.0, [0.1], prompt=1, output=1)], wall_s=0.0)
    assert m["request_throughput"] is None and m["output_throughput"] is None
    assert m["total_token_throughput"] is None and m["completed"] == 1


def test_every_metric_has_mean_std_median_p90_and_p99_in_ms() -> None:
    m = vllm_bench_metrics([], wall_s=1.0)
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "std", "median", "p90", "p99"):
            assert m[f"{stat}_{metric}_ms"] is None, (stat, metric)
    assert (m["completed"], m["failed"], m["total_output_tokens"]) == (0, 0, 0)
