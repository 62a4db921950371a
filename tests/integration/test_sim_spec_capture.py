"""Speculative decoding's capture sizes: the simulator, started from a profile's own argv, captures what
the gate expects for each drafting method — one rule (`vllm_flags/cudagraph_sizes.py`) behind both, checked
against vLLM 0.26.0's source and the real ngram run (tests/unit/test_real_vllm_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.graph_capture import GraphCaptureGate
from gates.outcome import Verdict
from launcher.logfacts.logfile import parse_file
from launcher.profile.candidate import expectations
from launcher.profile.plan import build_plan
from tests.doubles import FakeClock, ScriptedLog, make_context
from tests.integration.test_sim_parser_agree import run_sim
from tests.launcher_run import free_port, write_profile

pytestmark = pytest.mark.integration
FABLE_SIZES = [1, 2, 4, 8, 16, 32, 48, 64]  # profiles/fable-27b.toml


def _judge(tmp_path: Path, version: str, spec: dict[str, object], sizes: list[int]) -> tuple[Verdict, str]:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    args = {
        "max_num_seqs": 32,
        "compilation_config": {"cudagraph_capture_sizes": sizes},
        "speculative_config": spec,
        "sim_vllm_version": version,
    }
    write_profile(profiles, "spec", free_port(), args)
    plan = build_plan(profiles, "spec")
    flags = list(plan.argv[plan.argv.index("serve") + 2 :])  # run_sim adds the model, host and port
    for flag in ("--host", "--port"):
        if flag in flags:
            at = flags.index(flag)
            del flags[at : at + 2]
    log = run_sim(tmp_path, flags, until="Application startup complete.")
    facts = parse_file(log)[0].to_json()
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock, current_facts=dict(facts)), clock, expect=expectations(plan))
    outcome = GraphCaptureGate().check(ctx)
    return outcome.verdict, outcome.summary


@pytest.mark.parametrize(
    ("version", "method", "counts"),
    [
        ("0.26", "mtp", "PIECEWISE 8/8, FULL 7/7"),  # fable-27b: V2 rounds only its FULL decode graphs
        ("0.26", "eagle", "PIECEWISE 8/8, FULL 7/7"),
        ("0.26", "ngram", "PIECEWISE 7/7, FULL 7/7"),  # V1: every size rounded to a multiple of 2
        ("0.26", "draft_model", "PIECEWISE 7/7, FULL 7/7"),
        ("0.33", "mtp", "PIECEWISE 8/8, FULL 7/7"),
    ],
)
def test_each_drafting_method_passes_graph_capture(
    version: str, method: str, counts: str, tmp_path: Path
) -> None:
    spec: dict[str, object] = {"method": method, "num_speculative_tokens": 1}
    if method == "draft_model":
        spec["model"] = "test/draft-0.5b"
    verdict, summary = _judge(tmp_path, version, spec, FABLE_SIZES)
    assert verdict is Verdict.PASS, summary
    assert summary.startswith(f"graphs {counts}"), summary
    assert "without CUDA graphs" not in summary  # 64 tokens = 32 sequences of 2: max_num_seqs


def test_ngram_k2_warns_where_graphs_stop(tmp_path: Path) -> None:
    """The real 0.26.0 ngram run's shape: [1, 2, 4, 8] becomes [3, 6], graphs stop at 2 sequences."""
    spec: dict[str, object] = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}
    verdict, summary = _judge(tmp_path, "0.26", spec, [1, 2, 4, 8])
    assert verdict is Verdict.PASS, summary
    assert summary.startswith("graphs PIECEWISE 2/2, FULL 2/2; sizes [3, 6]"), summary
    assert "at most 2 sequence(s): above 2 they run without CUDA graphs (max_num_seqs 32)" in summary
