"""Each measurement trap of the field notes, planted in the simulator, caught by `launch bench`."""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise
from pathlib import Path

import pytest

from launcher.bench import corpus
from launcher.bench.checks import CHK_QUEUED, Flag
from launcher.bench.client import Client
from launcher.bench.options import BenchOptions
from launcher.bench.runner import Runner
from launcher.bench.target import discover, from_url
from launcher.bench.workload import BenchPrompt, ContextSpec, Workload
from tests.integration.bench_support import FAST, SPEED, bench_json, cell, flags, requests_of
from tests.simserver import running_sim

pytestmark = pytest.mark.integration

ONE_ROUND = ["--contexts", "short", "--rounds", "1", "--max-tokens", "48"]


def test_requests_queued_behind_max_num_seqs_are_in_the_cell_chk_judges(tmp_path: Path) -> None:
    """One slot at c4 (field note: max-num-seqs 8 at c32 gave chk 9.55). What chk comes to is a
    figure (bench/bench_figures.py `queued`: about 4); the rule on it is unit-tested on scripted
    rounds (tests/unit/test_bench_cells.py). Here: the queue is real and the cell reports on it."""
    truth = tmp_path / "truth.jsonl"
    with running_sim([*FAST, "--max-num-seqs", "1", "--sim-ground-truth", str(truth)], speed=SPEED) as sim:
        summary = bench_json(sim.url, tmp_path / "q", *ONE_ROUND, "--concurrency", "4", "--prompts", "4")
    entry = cell(summary, "short", 4)
    rows = {r["id"]: r for r in map(json.loads, truth.read_text(encoding="utf-8").splitlines())}
    timed = sorted((rows[r["response_id"]] for r in requests_of(tmp_path / "q", phase="timed")),
                   key=lambda row: row["first_token_mono"])  # fmt: skip
    assert len(timed) == entry["requests"] == 4
    # the sim's own record: each request's first token came after the previous one's last
    assert all(later["first_token_mono"] >= earlier["finish_mono"] for earlier, later in pairwise(timed))
    # decode is 1 / ITL median: None where a busy client read most chunks in one go, and chk with it
    decode, chk = entry["decode_tok_s"], entry["chk"]
    assert chk == (None if decode is None else pytest.approx(decode * 4 / entry["total_tok_s"]))
    assert ("queued" in flags(entry)) == (chk is not None and chk > CHK_QUEUED)


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
    # several tokens per chunk: the usage counts more tokens than there were events, and decode is
    # per token (tests/unit/test_bench_record.py; the rate itself: bench/bench_figures.py `spec`)
    timed = requests_of(tmp_path / "mixed", phase="timed")
    assert timed and all(r["tokens_from_usage"] for r in timed)
    assert sum(r["output_tokens"] for r in timed) > sum(r["events"] for r in timed)


def test_reasoning_with_a_small_budget_leaves_empty_answers_and_warns(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-reasoning", "--reasoning-parser", "qwen3"], speed=SPEED) as sim:
        summary = bench_json(
            sim.url, tmp_path / "r", *ONE_ROUND, "--concurrency", "2", "--prompts", "2", "--max-tokens", "16"
        )
    entry = cell(summary, "short", 2)
    assert entry["empty_answers"] == 2 and "empty-answers" in flags(entry)
    assert entry["think_share"] == pytest.approx(1.0) and entry["ttfc_s"] is None and entry["ttft_s"] > 0
    assert "small-max-tokens" in flags(summary) and summary["server"]["reasoning_model"] is True


def test_degenerate_answers_are_flagged_and_every_token_the_sim_wrote_is_measured(tmp_path: Path) -> None:
    """How exactly slow decode is measured (about 166 tok/s, ITL within 5 % of the sim's own chunk
    gaps) is a figure: bench/bench_figures.py `slow`. Here: every token the sim wrote was received,
    counted and timed."""
    truth = tmp_path / "truth.jsonl"
    args = [*FAST, "--sim-degenerate", "--sim-slow-decode", "3", "--sim-ground-truth", str(truth)]
    with running_sim(args, speed=SPEED) as sim:
        summary = bench_json(sim.url, tmp_path / "d", *ONE_ROUND, "--concurrency", "1", "--prompts", "2")
    entry = cell(summary, "short", 1)
    assert "degenerate" in flags(entry) and entry["answer_score_median"] < 0.2
    rows = {r["id"]: r for r in map(json.loads, truth.read_text(encoding="utf-8").splitlines())}
    timed = requests_of(tmp_path / "d", phase="timed")
    assert len(timed) == 2 and (entry["decode_tok_s"] is None or entry["decode_tok_s"] > 0)  # None: as below
    for request in timed:
        written = rows[request["response_id"]]["tokens"]
        assert request["output_tokens"] == len(written) == request["events"]  # one token per step
        itl = request["itl_median_s"]  # 0 where a busy client read most chunks in one go
        assert itl >= 0 and request["decode_tok_s"] == (pytest.approx(1 / itl) if itl else None)


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
