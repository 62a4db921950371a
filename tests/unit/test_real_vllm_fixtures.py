"""The gates judged on logs recorded from the real vLLM 0.26.0 on an H200 (tests/data/real-vllm-0.26/,
recorded by scripts/real-vllm/check-release.sh; docs/real-vllm.md tells each step).

The ngram run is the one that corrected the graph_capture gate: vLLM's config line printed the
profile's [1, 2, 4, 8] while its model runner captured [3, 6] (rounded for 2 speculative tokens).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.chain import ChainRunner
from gates.graph_capture import GraphCaptureGate
from gates.kernel_marker import KernelMarkerGate
from gates.leak_rule import LeakRule, judge
from gates.outcome import Verdict
from launcher.logfacts.logfile import parse_file
from launcher.profile.candidate import expectations
from launcher.profile.plan import build_plan
from tests.conftest import REPO
from tests.doubles import FakeClock, FakeServer, ScriptedLog, make_context

DATA = REPO / "tests" / "data" / "real-vllm-0.26"
PROFILES = REPO / "scripts" / "real-vllm" / "profiles"


def _judge(profile: str, log: Path) -> tuple[Verdict, str]:
    plan = build_plan(PROFILES, profile)
    facts = parse_file(log)[0].to_json()
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock, current_facts=dict(facts)), clock, expect=expectations(plan))
    outcome = GraphCaptureGate().check(ctx)
    return outcome.verdict, outcome.summary


@pytest.mark.parametrize(
    ("profile", "log", "summary"),
    [
        ("tiny", "tiny.log", "graphs PIECEWISE 51/51, FULL 51/51"),
        ("tiny-ngram", "tiny-ngram.log", "graphs PIECEWISE 2/2, FULL 2/2; sizes [3, 6]"),
    ],
)
def test_graph_capture_passes_on_the_real_runs(profile: str, log: str, summary: str) -> None:
    verdict, text = _judge(profile, DATA / log)
    assert verdict is Verdict.PASS, text
    assert text.startswith(summary)


def test_graph_capture_warns_where_the_real_ngram_runs_graphs_stop() -> None:
    """[3, 6] with 3 tokens per sequence: decode batches of 3+ sequences ran without graphs."""
    verdict, text = _judge("tiny-ngram", DATA / "tiny-ngram.log")
    assert verdict is Verdict.PASS
    # the profile leaves max_num_seqs to vLLM (1024 on the H200; 256 at least on a GPU)
    assert "at most 2 sequence(s): above 2 they run without CUDA graphs (vLLM's default max_num_seqs" in text
    _, plain = _judge("tiny", DATA / "tiny.log")
    assert "without CUDA graphs" not in plain


def test_the_dry_run_says_where_the_ngram_profiles_graphs_stop() -> None:
    plan = build_plan(PROFILES, "tiny-ngram")
    stops = [w for w in plan.warnings if "without CUDA graphs" in w]
    assert len(stops) == 1 and "at most 2 sequence(s) (6 tokens)" in stops[0], plan.warnings
    assert "V1 model runner" in stops[0]


def test_the_real_ngram_log_prints_unrounded_sizes() -> None:
    facts = parse_file(DATA / "tiny-ngram.log")[0].to_json()
    assert facts["capture_sizes"] == [1, 2, 4, 8]
    assert facts["graphs_captured_by_mode"] == {"PIECEWISE": 2, "FULL": 2}
    assert facts["vllm_version"] == "0.26.0" and facts["outcome"] == "ready"


def test_vllms_own_free_memory_failure_is_read_and_named_in_the_verdict() -> None:
    """Step 3: torch held 120 GiB; `launch try --skip-preflight` let vLLM fail by itself."""
    facts = parse_file(DATA / "free-memory.log")[0].to_json()
    assert facts["outcome"] == "failed" and facts["failure_kind"] == "free_memory"
    clock = FakeClock()
    log = ScriptedLog(clock, current_facts=dict(facts))
    ctx = make_context(log, clock, server=FakeServer(died="exited with code 1"))
    gate = KernelMarkerGate({"patterns": ["Using FLASH_ATTN attention backend"]})
    result = ChainRunner([gate]).run(ctx).results[0]
    assert result.verdict is Verdict.FAIL
    assert result.summary.startswith(
        "engine exited with code 1 (free_memory: ValueError: Free memory on device cuda:0 (18.77/139.8 GiB) "
        "on startup is less than desired GPU memory utilization (0.2, 27.96 GiB)."
    )


def test_a_killed_api_server_leaves_a_log_that_claims_no_failure() -> None:
    """Step 4: the API server was SIGKILLed after startup; only the orphaned engine's reaping is logged."""
    facts = parse_file(DATA / "orphan-api-killed.log")[0].to_json()
    assert facts["outcome"] == "ready" and facts["failure_kind"] is None
    assert facts["kv_cache_tokens"] == 29_009_056


def test_the_leak_rule_finds_no_leak_in_the_real_memory_series() -> None:
    """Step 1: five 10 s windows of traffic (826 requests); RSS crept 0.2 MiB a window, GPU flat."""
    report = json.loads((DATA / "try-tiny.json").read_text(encoding="utf-8"))
    evidence = next(g for g in report["gates"] if g["name"] == "memory_leak")["evidence"]
    rule = LeakRule(**evidence["rule"])
    rss = judge(evidence["rss_mib"], rule)
    assert rss.judged and not rss.leak and rss.longest_growing_run == 3  # growing, but by 0.8 MiB in all
    assert not judge(evidence["gpu_mib"], rule).leak
    assert evidence["requests"] == {"completed": 826, "failed": 0}
