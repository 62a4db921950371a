"""Each measurement trap of the field notes, planted in the simulator, caught by `launch bench`."""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path

import pytest

from launcher.bench import corpus
from launcher.bench.checks import Flag
from launcher.bench.client import Client
from launcher.bench.options import BenchOptions
from launcher.bench.runner import Runner
from launcher.bench.target import discover, from_url
from launcher.bench.workload import BenchPrompt, ContextSpec, Workload
from tests.integration.bench_support import FAST, SPEED, bench_json, cell, flags, requests_of
from tests.simserver import running_sim

pytestmark = pytest.mark.integration

ONE_ROUND = ["--contexts", "short", "--rounds", "1", "--max-tokens", "48"]


@pytest.mark.alone
def test_queueing_behind_max_num_seqs_shows_in_chk(tmp_path: Path) -> None:
    # field note: max-num-seqs 8 at c32 gave chk 9.55; here 1 slot at c4 must give about 4
    with running_sim([*FAST, "--max-num-seqs", "1"], speed=SPEED) as sim:
        summary = bench_json(sim.url, tmp_path / "q", *ONE_ROUND, "--concurrency", "4", "--prompts", "4")
    entry = cell(summary, "short", 4)
    assert entry["chk"] > 2.5 and "queued" in flags(entry)


@pytest.mark.alone
def test_identical_greedy_prompts_are_one_sequence_and_mixed_acceptance_differs(tmp_path: Path) -> None:
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2})
    with running_sim([*FAST, "--speculative-config", spec], speed=SPEED) as sim:
        same = bench_json(
            sim.url,
            tmp_path / "same",
            *ONE_ROUND,
            "--concurrency",
            "4",
            "--prompts",
            "1",
            "--temperature",
            "0",
        )
        mixed = bench_json(sim.url, tmp_path / "mixed", *ONE_ROUND, "--concurrency", "4", "--prompts", "4")
    one, many = cell(same, "short", 4), cell(mixed, "short", 4)
    assert "same-sequence" in flags(one) and "one sequence printed 4 times" in json.dumps(one["flags"])
    assert "same-sequence" not in flags(many)
    assert one["spec_acceptance"] is not None and many["spec_acceptance"] is not None
    assert one["spec_acceptance"] != pytest.approx(many["spec_acceptance"], abs=1e-6)
    # several tokens per chunk: decode counts tokens, not chunks. Checked per request against the
    # chunk rate it saw itself, so the machine's load cannot move the verdict.
    ratios = []
    for row in requests_of(tmp_path / "mixed"):
        gaps = [b - a for a, b in zip(row["event_offsets_s"], row["event_offsets_s"][1:], strict=False)]
        if row.get("decode_tok_s") and len(gaps) >= 3:
            ratios.append(row["decode_tok_s"] * statistics.median(gaps))
    assert ratios and statistics.median(ratios) > 1.2, ratios


def test_reasoning_with_a_small_budget_leaves_empty_answers_and_warns(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-reasoning", "--reasoning-parser", "qwen3"], speed=SPEED) as sim:
        summary = bench_json(
            sim.url, tmp_path / "r", *ONE_ROUND, "--concurrency", "2", "--prompts", "2", "--max-tokens", "16"
        )
    entry = cell(summary, "short", 2)
    assert entry["empty_answers"] == 2 and "empty-answers" in flags(entry)
    assert entry["think_share"] == pytest.approx(1.0) and entry["ttfc_s"] is None and entry["ttft_s"] > 0
    assert "small-max-tokens" in flags(summary) and summary["server"]["reasoning_model"] is True


@pytest.mark.alone
def test_degenerate_answers_are_flagged_and_slow_decode_is_measured_exactly(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    args = [*FAST, "--sim-degenerate", "--sim-slow-decode", "3", "--sim-ground-truth", str(truth)]
    with running_sim(args, speed=SPEED) as sim:
        summary = bench_json(sim.url, tmp_path / "d", *ONE_ROUND, "--concurrency", "1", "--prompts", "2")
    entry = cell(summary, "short", 1)
    assert "degenerate" in flags(entry) and entry["answer_score_median"] < 0.2
    # slow decode x3: 6 ms steps -> about 166 tok/s, and within 5 % of the sim's own chunk gaps
    assert 120 < entry["decode_tok_s"] < 180
    rows = {r["id"]: r for r in map(json.loads, truth.read_text(encoding="utf-8").splitlines())}
    for request in requests_of(tmp_path / "d", phase="timed"):
        stamps = [t[0] for t in rows[request["response_id"]]["tokens"]]
        gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a]
        assert request["itl_median_s"] == pytest.approx(statistics.median(gaps), rel=0.05)


def test_nested_cold_prefixes_show_in_the_hit_delta() -> None:
    """The 43K prompt that contained the 21K one: planted through the library, caught two ways."""

    async def measure() -> tuple[object, object]:
        with running_sim(FAST, speed=SPEED) as sim:
            endpoint = from_url(sim.url, None, None)
            async with Client(endpoint.base_url) as client:
                target = await discover(client, endpoint)
                runner = Runner(client, target, BenchOptions(max_tokens=8), run_id="nest")
                spec = ContextSpec("3k", 3000)
                document = corpus.document(5, 3000)
                nested = [
                    BenchPrompt(spec.name, k, "en", document[: len(document) * (k + 1) // 3], "Summarize.")
                    for k in range(3)
                ]
                bad = await runner.cold(spec, nested)
                good = await runner.cold(spec, [Workload("nest", 3).cold_prompt(spec, k) for k in range(3)])
                return bad, good

    bad, good = asyncio.run(measure())
    assert {f.flag for f in bad.findings} == {Flag.COLD_NOT_COLD, Flag.NESTED_PREFIX}  # type: ignore[attr-defined]
    assert bad.delta.prefix_hits > 1000  # type: ignore[attr-defined]
    assert good.findings == () and good.delta.prefix_hits == 0  # type: ignore[attr-defined]
    assert good.proof.startswith("cold proven")  # type: ignore[attr-defined]
