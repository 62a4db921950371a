"""The gates judged on logs recorded from the real vLLM 0.26.0 on an H200 (tests/data/real-vllm-0.26/).

The ngram run is the one that corrected the graph_capture gate: vLLM's config line printed the
profile's [1, 2, 4, 8] while its model runner captured [3, 6] (rounded for 2 speculative tokens).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.graph_capture import GraphCaptureGate
from gates.outcome import Verdict
from launcher.logfacts.logfile import parse_file
from launcher.profile.plan import build_plan
from launcher.supervisor.candidate import expectations
from tests.conftest import REPO
from tests.doubles import FakeClock, ScriptedLog, make_context

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


def test_the_real_ngram_log_prints_unrounded_sizes() -> None:
    facts = parse_file(DATA / "tiny-ngram.log")[0].to_json()
    assert facts["capture_sizes"] == [1, 2, 4, 8]
    assert facts["graphs_captured_by_mode"] == {"PIECEWISE": 2, "FULL": 2}
    assert facts["vllm_version"] == "0.26.0" and facts["outcome"] == "ready"
