"""What `launch bench` prints and writes (launcher/bench/report.py, results.py) and which server it
measures (target.py), from a run on a scripted clock: every figure in the table is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.bench import checks, report
from launcher.bench.cells import CellSummary, RoundResult, judge
from launcher.bench.exchange import Phase
from launcher.bench.options import BenchOptions, parse_concurrency
from launcher.bench.results import ColdResult, RunResult
from launcher.bench.server_metrics import MetricsDelta, MetricsSnapshot
from launcher.bench.target import Target, api_key_from_env, from_profile, from_url
from launcher.bench.workload import ContextSpec
from launcher.errors import BadInput
from tests.scripted_bench import failed, one_round, request

SHORT = ContextSpec("short", 0)
TARGET = Target("http://127.0.0.1:8000", "qwen3-8b", 32768, "--url")
BEFORE = MetricsSnapshot(
    10_000.0, {"process_start_time_seconds": 9_000.0, "vllm:request_success_total": 12.0}
)


def cell(concurrency: int, delta: MetricsDelta | None = None) -> CellSummary:
    records = [request(0.0, concurrency=concurrency) for _ in range(concurrency)]
    rounds = (one_round(records, 1, delta), one_round(records, 2, delta))
    signatures = [(f"p{i}", str(i)) for i in range(concurrency)]
    return judge("short", concurrency, rounds, signatures=signatures, reasoning=False)


def cold() -> ColdResult:
    records = tuple(request(float(k), first_s=0.250, concurrency=1, phase=Phase.COLD) for k in range(3))
    delta = MetricsDelta(prefix_queries=60, prefix_hits=0)
    finding, proof = checks.cold_proof(delta, len(records))
    return ColdResult(SHORT, records, delta, proof, () if finding is None else (finding,))


def run(*cells: CellSummary, findings: tuple[checks.Finding, ...] = (), reasoning: bool = False) -> RunResult:
    options = BenchOptions(concurrency=(1, 2), contexts=(SHORT,), rounds=2)
    return RunResult("r1", TARGET, options, BEFORE, {"en": 1.3}, reasoning, (cold(),), cells, findings,
                     ("one note",))  # fmt: skip


def test_numbers_read_as_an_operator_reads_them() -> None:
    assert [report.millis(v) for v in (None, 0.0421, 9.9994, 12.34)] == ["-", "42.1", "9999.4", "12340.0"]
    assert [report.number(v) for v in (None, 3.14159)] == ["-", "3.1"] and report.number(2.0, 2) == "2.00"
    assert [report.percent(v) for v in (None, 0.5, 0.987)] == ["-", "50", "99"]
    assert report.percent(0.8, 1) == "80.0"


def test_the_table_has_one_row_per_cell_with_its_medians() -> None:
    lines = report.table(run(cell(1), cell(2))).splitlines()
    assert lines[0].split("  ")[:3] == ["context", "c", "TTFT cold (ms)"] and set(lines[1]) == {"-"}
    one = lines[2].split()
    # TTFT cold is the cold phase's (250 ms), TTFT warm the cell's (20 ms), decode 1 / 10 ms
    assert one[:7] == ["short", "1", "250.0", "20.0", "20.0", "100.0", f"{10 / 0.111:.1f}"]
    assert one[7:] == [f"{100 / (10 / 0.111):.2f}", "0%", "-", "-", "0/2", "-"]
    two = lines[3].split()
    assert two[:2] == ["short", "2"] and two[-2] == "0/4"


def test_a_cell_flagged_shows_its_flags_and_the_cache_figures_it_has() -> None:
    delta = MetricsDelta(prefix_queries=100, prefix_hits=95, draft_tokens=40, accepted_tokens=30,
                         generation_tokens=2000)  # fmt: skip
    noisy = cell(2, delta)
    row = report.table(run(noisy)).splitlines()[2].split()
    assert row[-4:-1] == ["95", "75.0", "0/4"]
    assert row[-1] == "other-traffic"  # 2000 generated while we received 40 per round


def test_the_latency_table_speaks_vllm_bench_serve() -> None:
    text = report.latency_table(run(cell(1)))
    latency, throughput = text.split("\n\n")
    rows = [line.split() for line in latency.splitlines()[2:]]
    assert [r[2] if r[0] == "short" else r[0] for r in rows] == ["TTFT", "TPOT", "ITL", "E2EL"]
    ttft = rows[0]
    assert ttft[:4] == ["short", "1", "TTFT", "(ms)"] and ttft[4:] == ["20.00"] * 4
    assert throughput.splitlines()[0].split() == " ".join(report.THROUGHPUT_HEADERS).split()
    assert throughput.splitlines()[2].split()[:4] == ["short", "1", "2", "0"]  # a request a round, 2 rounds


def test_the_explanation_names_the_server_the_cold_proof_and_each_finding_once() -> None:
    slow = checks.Finding(checks.Flag.FRESH_SERVER, "the server started 100s ago")
    text = report.explain(run(cell(1), cell(2), findings=(slow, slow)))
    lines = text.splitlines()
    assert lines[0] == "server http://127.0.0.1:8000 (--url), model qwen3-8b, up 1000s"
    assert lines[1] == "short: 20 prompt tokens; cold TTFT 250.0 ms over 3 unique prefixes; " + cold().proof
    assert lines.count("[fresh-server] the server started 100s ago") == 1
    assert lines[-1] == "note: one note"


def test_a_reasoning_run_says_how_much_of_the_output_was_thinking() -> None:
    text = report.explain(run(cell(1), reasoning=True))
    assert text.splitlines()[0].endswith(", reasoning model")
    assert "think % (reasoning tokens / output tokens): short c1 0%" in text


def test_the_summary_json_carries_the_server_options_cells_and_flag_counts() -> None:
    data = run(cell(1), cell(2), findings=(checks.Finding(checks.Flag.FRESH_SERVER, "fresh"),)).as_json()
    assert data["server"] == {
        "url": "http://127.0.0.1:8000", "origin": "--url", "model": "qwen3-8b", "max_model_len": 32768,
        "uptime_s": 1000.0, "requests_served_before": 12.0, "reasoning_model": False,
        "prefix_cache_metrics": False, "spec_decode_metrics": False, "metrics_error": None,
    }  # fmt: skip
    assert data["options"]["contexts"] == ["short"] and list(data["options"]["concurrency"]) == [1, 2]
    assert [c["concurrency"] for c in data["cells"]] == [1, 2]
    assert data["contexts"][0]["cold_ttft_s"] == pytest.approx(0.250)
    assert data["contexts"][0]["cold_ttft_samples_s"] == pytest.approx([0.250] * 3)
    assert data["contexts"][0]["proof"].startswith("cold proven: 0 of 60")
    assert data["flag_counts"] == {"fresh-server": 1} and data["notes"] == ["one note"]
    assert json.loads(json.dumps(data))["cells"] == data["cells"]  # plain JSON, written as is


def test_a_cold_phase_that_hit_the_cache_carries_its_finding_into_the_run() -> None:
    hit = MetricsDelta(prefix_queries=100, prefix_hits=60)
    finding, proof = checks.cold_proof(hit, 3)
    assert finding is not None
    warm_cold = ColdResult(SHORT, cold().records, hit, proof, (finding,))
    result = RunResult("r", TARGET, BenchOptions(), BEFORE, {}, False, (warm_cold,), (), (), ())
    assert [f.flag for f in result.all_findings] == [checks.Flag.COLD_NOT_COLD]
    assert result.cold_for("short") is warm_cold and result.cold_for("8k") is None


def test_records_are_written_as_their_round_is_parsed(tmp_path: Path) -> None:
    sink = report.RecordSink(tmp_path / "out" / "requests.jsonl").open()
    sink([request(0.0), request(1.0)])
    lines = (tmp_path / "out" / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["phase"] == "timed"  # flushed before the next round
    sink.close()
    sink([request(2.0)])  # after close: nothing, no error
    assert len((tmp_path / "out" / "requests.jsonl").read_text(encoding="utf-8").splitlines()) == 2
    report.write_summary(tmp_path / "deep" / "summary.json", {"cells": []})
    assert json.loads((tmp_path / "deep" / "summary.json").read_text(encoding="utf-8")) == {"cells": []}


def test_a_url_is_normalised_to_the_server_root() -> None:
    assert from_url("127.0.0.1:8000", None, None).base_url == "http://127.0.0.1:8000"
    assert from_url("http://h:9/v1/", "m", "k").base_url == "http://h:9"
    assert from_url("https://gw.example/vllm/v1", None, None).base_url == "https://gw.example/vllm"
    for bad in ("ftp://h/x", "http://", "http:///v1"):
        with pytest.raises(BadInput, match="is not an http"):
            from_url(bad, None, None)


def test_a_profile_names_the_server_it_would_serve(profiles_dir: Path, state_dir: Path) -> None:
    engine = '[engine]\nmodel = "org/m"\nhost = "0.0.0.0"\nport = 8123\nserved_model_name = ["fast", "m"]\n'
    (profiles_dir / "p.toml").write_text(engine)
    endpoint = from_profile(profiles_dir, state_dir, "p", None, None)
    assert (endpoint.base_url, endpoint.model, endpoint.origin) == (
        "http://127.0.0.1:8123",
        "fast",
        "profile p",
    )
    (profiles_dir / "v6.toml").write_text('[engine]\nmodel = "org/m"\nhost = "::1"\nport = 8124\n')
    assert from_profile(profiles_dir, state_dir, "v6", "chosen", None).base_url == "http://[::1]:8124"
    assert from_profile(profiles_dir, state_dir, "v6", "chosen", None).model == "chosen"


def test_the_api_key_comes_from_a_named_variable_that_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert api_key_from_env(None) is None
    monkeypatch.setenv("BENCH_KEY", "s3cret")
    assert api_key_from_env("BENCH_KEY") == "s3cret"
    monkeypatch.setenv("BENCH_KEY", "")
    with pytest.raises(BadInput, match="--api-key-env BENCH_KEY: the variable is not set or empty"):
        api_key_from_env("BENCH_KEY")


def test_concurrency_levels_are_sorted_distinct_and_positive() -> None:
    assert parse_concurrency("8,1,2,2") == (1, 2, 8)
    for bad in ("0,1", "", "a,b", "-1"):
        with pytest.raises(BadInput, match="--concurrency"):
            parse_concurrency(bad)


def test_a_round_of_one_failed_request_has_no_throughput() -> None:
    empty = RoundResult(1, (failed(0.0),), 0.5, MetricsDelta())
    assert empty.total_tok_s is None and empty.output_tokens == 0 and empty.med("ttft_s") is None


def test_cold_ttft_is_the_median_of_the_successful_cold_requests_only() -> None:
    records = (
        request(0.0, first_s=0.200, concurrency=1, phase=Phase.COLD),
        request(1.0, first_s=0.300, concurrency=1, phase=Phase.COLD),
        failed(2.0),
    )
    result = ColdResult(SHORT, records, MetricsDelta(), "p", ())
    assert result.ttft_s == pytest.approx(0.250) and result.prompt_tokens == 20
    data = result.as_json()
    assert data["cold_ttft_samples_s"] == pytest.approx([0.200, 0.300])
    assert data["spread"] == pytest.approx(0.100 / 0.250) and data["prefix_hit_rate"] is None


def test_flag_counts_add_the_run_the_cold_phases_and_every_cell() -> None:
    queued = checks.Finding(checks.Flag.QUEUED, "q")
    busy = CellSummary("short", 2, cell(2).rounds, (queued,))
    busier = CellSummary("short", 4, cell(4).rounds, (queued, checks.Finding(checks.Flag.ERRORS, "e")))
    fresh = checks.Finding(checks.Flag.FRESH_SERVER, "f")
    data = run(busy, busier, findings=(fresh,)).as_json()
    assert data["flag_counts"] == {"fresh-server": 1, "queued": 2, "errors": 1}
    assert data["flags"] == [{"flag": "fresh-server", "message": "f"}]  # run-level flags only


def test_the_explanation_says_what_it_does_not_know() -> None:
    unknown = MetricsSnapshot(10_000.0, {}, error="connection refused")
    nothing_cold = ColdResult(SHORT, (), MetricsDelta(), "cold not proven: x", ())
    options = BenchOptions(concurrency=(1,), contexts=(SHORT,), rounds=1)
    result = RunResult("r", TARGET, options, unknown, {}, False, (nothing_cold,), (), (), ())
    lines = report.explain(result).splitlines()
    assert lines[0] == "server http://127.0.0.1:8000 (--url), model qwen3-8b, up unknown"
    assert lines[1] == "short: - prompt tokens; cold TTFT - ms over 0 unique prefixes; cold not proven: x"
    assert result.as_json()["server"]["metrics_error"] == "connection refused"


def test_the_spread_column_shows_the_larger_of_decode_and_output_and_a_dash_for_one_round() -> None:
    steady = [request(0.0, round_=1) for _ in range(2)]
    slower = [request(0.0, step_s=0.0125, round_=2) for _ in range(2)]  # decode 80 instead of 100
    sigs = [("a", "1"), ("b", "2")]
    two = judge("short", 2, (one_round(steady, 1), one_round(slower, 2)), signatures=sigs, reasoning=False)
    spreads = two.as_json()["spread"]
    widest = max(spreads["decode_tok_s"], spreads["total_tok_s"])
    assert report.table(run(two)).splitlines()[2].split()[8] == f"{widest * 100:.0f}%"
    one = judge("short", 2, (one_round(steady, 1),), signatures=sigs, reasoning=False)
    assert report.table(run(one)).splitlines()[2].split()[8] == "-"


def test_a_cell_that_only_failed_shows_dashes_not_zeros_in_the_latency_table() -> None:
    only_failed = (RoundResult(1, (failed(0.0),), 0.5, MetricsDelta()),)
    broken = judge("short", 1, only_failed, signatures=[("a", "1")], reasoning=False)
    latency, throughput = report.latency_table(run(broken)).split("\n\n")
    ttft = latency.splitlines()[2].split()
    assert ttft[:4] == ["short", "1", "TTFT", "(ms)"] and ttft[4:] == ["-"] * 4
    assert throughput.splitlines()[2].split() == ["short", "1", "0", "1", "-", "-", "-"]
