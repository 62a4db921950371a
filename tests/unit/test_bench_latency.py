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
