"""`launch bench` end to end on a healthy simulator: numbers, proofs, files, and the CLI's edges."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher.bench.checks import CHK_QUEUED
from tests.integration.bench_support import (
    FAST,
    SMALL,
    SPEED,
    bench_json,
    cell,
    flags,
    launch_bench,
    requests_of,
)
from tests.simserver import SimHandle, free_port, running_sim

BenchRun = tuple[dict[str, Any], Path]  # `launch bench --json`'s summary, and its output dir

# one simulator and one bench run for the module: its tests go to one worker (addopts: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_bench_run")]
# How close the measured rates come to the simulator's pace is a figure, not a verdict of these tests
# (bench/bench_figures.py `cells`; docs/decisions/0013): they judge what was measured and reported.


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim([*FAST, "--max-num-seqs", "8", "--api-key", "s3cret"], speed=SPEED) as handle:
        yield handle


@pytest.fixture(scope="module")
def run(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    out = tmp_path_factory.mktemp("bench") / "out"
    env = {**os.environ, "SIM_KEY": "s3cret"}
    args = [*SMALL, "--contexts", "short,1k", "--api-key-env", "SIM_KEY"]
    return bench_json(sim.url, out, *args, env=env), out


def test_cells_report_decode_and_chk_from_what_their_rounds_measured(run: BenchRun) -> None:
    summary, out = run
    assert [(c["context"], c["concurrency"]) for c in summary["cells"]] == [
        ("short", 1),
        ("short", 4),
        ("1k", 1),
        ("1k", 4),
    ]
    for entry in summary["cells"]:
        timed = requests_of(out, phase="timed", context=entry["context"], concurrency=entry["concurrency"])
        assert entry["errors"] == 0 and entry["empty_answers"] == 0 and entry["requests"] == len(timed) == 12
        assert entry["rounds"] == 3 and [r["round"] for r in entry["per_round"]] == [1, 2, 3]
        assert all(r["output_tokens"] == sum(q["output_tokens"] for q in timed if q["round"] == r["round"])
                   for r in entry["per_round"])  # fmt: skip
        # decode is 1 / ITL median: None where a busy client read most chunks in one go (gaps of 0)
        decode, total, level = entry["decode_tok_s"], entry["total_tok_s"], entry["concurrency"]
        assert total > 0 and (decode is None or decode > 0)
        assert entry["chk"] == (None if decode is None else pytest.approx(decode * level / total))
        queued = level > 1 and entry["chk"] is not None and entry["chk"] > CHK_QUEUED
        assert ("queued" in flags(entry)) == queued


def test_cold_is_proven_cold_and_warm_cells_hit_the_cache(run: BenchRun) -> None:
    summary, _ = run
    long_context = next(c for c in summary["contexts"] if c["context"] == "1k")
    assert long_context["prefix_hit_rate"] == 0.0 and long_context["proof"].startswith("cold proven")
    assert 950 < long_context["prompt_tokens"] < 1050  # calibrated against the server's own count
    assert cell(summary, "1k", 1)["prefix_hit_rate"] > 0.95  # every prompt warmed before the rounds


def test_every_level_ran_the_same_prompts_and_all_were_warmed(run: BenchRun) -> None:
    _, out = run
    warmed = {r["prompt"] for r in requests_of(out, phase="warmup", context="1k")}
    for level in (1, 4):
        timed = requests_of(out, phase="timed", context="1k", concurrency=level)
        assert {r["prompt"] for r in timed} == warmed == {0, 1, 2, 3}
        assert all(r["cached_tokens"] > 0.9 * r["prompt_tokens"] for r in timed)


def test_first_run_after_a_restart_is_flagged(run: BenchRun) -> None:
    summary, _ = run
    assert "fresh-server" in flags(summary)
    assert summary["server"]["requests_served_before"] == 0.0


def test_jsonl_has_usage_tokens_not_delta_counts(run: BenchRun) -> None:
    _, out = run
    timed = requests_of(out, phase="timed")
    assert timed and all(r["tokens_from_usage"] for r in timed)
    assert all(r["output_tokens"] == r["events"] for r in timed)  # one token per step in the sim


def test_table_output_and_explanations(sim: SimHandle, tmp_path: Path) -> None:
    env = {**os.environ, "SIM_KEY": "s3cret"}
    done = launch_bench(
        [
            "--url",
            sim.url,
            "--api-key-env",
            "SIM_KEY",
            "--contexts",
            "short",
            "--concurrency",
            "2",
            "--rounds",
            "1",
            "--prompts",
            "2",
            "--max-tokens",
            "16",
        ],
        tmp_path / "t",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["context", "c", "TTFT", "cold"]
    # both tables in ms, every throughput with its unit
    assert "TTFT cold (ms)  TTFT warm (ms)  TTFC (ms)" in lines[0]
    first_row = lines[2].split()
    assert all(not v.endswith("s") for v in first_row[2:5]) and float(first_row[3]) > 1  # ms, not seconds
    assert any("request_throughput (req/s)" in line and "output_throughput (tok/s)" in line for line in lines)
    assert lines[2].split()[:2] == ["short", "2"]
    assert any(line.startswith("short: ") and "cold proven" in line for line in lines)
    assert any(line.startswith("chk: decode x c / output tok/s") for line in lines)  # the legend
    assert any(line.split()[:3] == ["context", "c", "metric"] for line in lines)
    ttft = next(line.split() for line in lines if "TTFT (ms)" in line)
    assert ttft[:4] == ["short", "2", "TTFT", "(ms)"] and all(float(v) > 0 for v in ttft[4:8])
    assert any("output_throughput" in line and "total_token_throughput" in line for line in lines)
    assert (tmp_path / "t" / "summary.json").exists() and (tmp_path / "t" / "requests.jsonl").exists()


def test_cells_carry_vllm_bench_serve_names_in_ms_and_tok_s(run: BenchRun) -> None:
    summary, out = run
    entry = cell(summary, "short", 4)
    timed = requests_of(out, phase="timed", context="short", concurrency=4)
    assert entry["completed"] == len(timed) and entry["failed"] == 0
    ttfts_ms = sorted(r["ttft_s"] * 1000 for r in timed)
    assert ttfts_ms[0] <= entry["median_ttft_ms"] <= ttfts_ms[-1]
    for name in ("ttft", "tpot", "itl", "e2el"):
        stats = [entry[f"{k}_{name}_ms"] for k in ("median", "p90", "p99")]
        assert 0 <= stats[0] <= stats[1] <= stats[2], (name, stats)
        assert entry[f"mean_{name}_ms"] > 0
    assert entry["total_token_throughput"] > entry["output_throughput"] > 0


def test_a_run_that_measured_nothing_exits_1(tmp_path: Path) -> None:
    # the engine dies after two requests: every timed request gets vLLM's HTTP 500 afterwards
    with running_sim([*FAST, "--sim-crash-after-requests", "2"], speed=SPEED) as sim:
        done = launch_bench(["--url", sim.url, "--json", *SMALL], tmp_path / "dead")
    assert done.returncode == 1, done.stderr
    assert "error: nothing was measured" in done.stderr and "Traceback" not in done.stderr
    summary = json.loads(done.stdout)  # the evidence is still printed and written
    assert all(c["completed"] == 0 and c["failed"] > 0 for c in summary["cells"])
    assert (tmp_path / "dead" / "summary.json").exists()


def test_missing_api_key_is_a_clear_error(sim: SimHandle, tmp_path: Path) -> None:
    done = launch_bench(["--url", sim.url], tmp_path / "nokey")
    assert done.returncode == 2 and "401" in done.stderr and "--api-key-env" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "nokey").exists()


def test_nothing_listening_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    done = launch_bench(["--url", f"http://127.0.0.1:{free_port()}"], tmp_path / "none")
    assert done.returncode == 2 and "nothing answers" in done.stderr and "never starts" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "none").exists()


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    for args in (
        ["--contexts", "huge", "--url", "http://127.0.0.1:1"],
        ["--concurrency", "0", "--url", "http://127.0.0.1:1"],
        [],
    ):
        done = launch_bench(args, tmp_path / "bad")
        assert done.returncode == 2 and done.stderr.startswith("error: "), (args, done.stderr)


def test_profile_names_the_server(tmp_path: Path, shipped_profiles: Path) -> None:
    with running_sim([*FAST, "--served-model-name", "fable-demo"], speed=SPEED) as sim:
        (shipped_profiles / "here.toml").write_text(
            f'extends = "demo"\n\n[engine]\nport = {sim.port}\nhost = "0.0.0.0"\n', encoding="utf-8"
        )
        done = launch_bench(
            [
                "--profile",
                "here",
                "--json",
                "--contexts",
                "short",
                "--concurrency",
                "1",
                "--rounds",
                "1",
                "--prompts",
                "1",
                "--max-tokens",
                "8",
            ],
            tmp_path / "p",
            pre=["--profiles-dir", str(shipped_profiles)],
        )
        assert done.returncode == 0, done.stderr
        server = json.loads(done.stdout)["server"]
        assert server["model"] == "fable-demo" and server["origin"] == "profile here"
        assert server["url"] == f"http://127.0.0.1:{sim.port}"
