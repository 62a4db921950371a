"""The second H200 session (vLLM 0.26.0, 2026-12-01) re-judged from its recordings in
tests/data/real-vllm-0.26/h200-2/ (copied unedited; docs/real-vllm.md tells each run): the log
parser, the graph_capture gate, the bench's degenerate detector and the state readers must still
read them as they read them on the device.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.graph_capture import GraphCaptureGate
from gates.outcome import Verdict
from launcher.logfacts.logfile import parse_file
from launcher.profile.candidate import expectations
from launcher.profile.plan import build_plan
from launcher.profile.semantics import capture_config
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.supervisor.history import History
from tests.conftest import REPO
from tests.doubles import FakeClock, ScriptedLog, make_context
from tests.recorded_bench import degenerate_message, read_cells, rescore, scored_as_recorded
from vllm_flags.cudagraph_sizes import expected_graphs

DATA = REPO / "tests" / "data" / "real-vllm-0.26" / "h200-2"
PROFILES = REPO / "scripts" / "real-vllm" / "profiles"
BOT_TOKEN_ERROR = (
    "RuntimeError: Llama3JsonToolParser could not locate the bot token '<|python_tag|>' in the tokenizer."
)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# --- issue 13: the engine core SIGKILLed after promotion, and a hand-started server ---

def test_the_killed_engine_cores_death_is_read_from_vllms_log() -> None:
    """Run 3's log: promoted, then SIGKILL of VLLM::EngineCore 4136; the API server says so first."""
    facts, _ = parse_file(DATA / "i13" / "engine.log")
    assert (facts.outcome, facts.failure_kind, facts.enforce_eager) == ("ready", None, True)
    assert facts.died_after_ready is not None and facts.died_after_ready.line_no == 322
    assert facts.died_after_ready.line.startswith("(APIServer pid=3753) WARNING 12-01 07:17:05")
    assert "engine core exited unexpectedly" in facts.died_after_ready.line


def test_each_engine_death_is_named_in_the_recorded_history() -> None:
    scan = History(DATA / "i13" / "history.jsonl").scan(profile="tiny-watch")
    assert scan.skipped == []
    deaths = [r for r in scan.records if r["event"] == "engine_died"]
    assert [d["how"] for d in deaths] == [
        "VLLM::EngineCore pid 1745 killed by SIGKILL",
        "VLLM::EngineCore pid 3189 exited (status not readable: its parent collected it first)",
        "VLLM::EngineCore pid 4136 exited (status not readable: its parent collected it first)",
    ]
    events = [r["event"] for r in scan.records]
    for death in (i for i, e in enumerate(events) if e == "engine_died"):
        assert events[death - 1] == "promoted" and events[death + 1] == "engine_stopped"
    # the last run's engine core is the one whose lines fill the recorded engine log
    assert "(EngineCore pid=4136)" in (DATA / "i13" / "engine.log").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["try-refused.txt", "launch-refused.txt"])
def test_a_hand_started_server_is_refused_with_the_hint(name: str) -> None:
    text = (DATA / "i13" / name).read_text(encoding="utf-8")
    assert "one model per GPU set: GPU 0 already serves a model: pid 5009 VLLM::EngineCore" in text
    assert "pid 4745 was not started by vllm-gate (no deployment mark), so no launcher will stop it" in text
    facts, _ = parse_file(DATA / "i13" / "hand-vllm.log")
    assert facts.outcome == "ready" and facts.vllm_version == "0.26.0"


# --- issue 22: tiny-chat promoted, the llama3_json candidate rejected, last-good again ---

def test_the_promotion_log_holds_three_starts_and_the_candidates_cause_line() -> None:
    facts, events = parse_file(DATA / "promotion" / "engine.log")
    banners = [e for e in events if e.kind == "banner"]
    assert [e.detail["startup"] for e in banners] == [1, 2, 3]
    assert (facts.outcome, facts.failure_kind, facts.died_after_ready) == ("ready", None, None)
    # the candidate (startup 2) started cleanly: the parser fails per request, not at startup
    lines = _lines(DATA / "promotion" / "engine.log")
    candidate = lines[banners[1].line_no - 1 : banners[2].line_no - 1]
    assert any("'tool_call_parser': 'llama3_json'" in line for line in candidate)
    assert any(e.kind == "ready" and banners[1].line_no < e.line_no < banners[2].line_no for e in events)
    causes = [line for line in candidate if BOT_TOKEN_ERROR in line]
    assert len(causes) == 5 and all(line.startswith("(APIServer pid=8814) ") for line in causes)
    others = lines[: banners[1].line_no] + lines[banners[2].line_no :]
    assert not any(BOT_TOKEN_ERROR in line for line in others)


def test_the_status_after_the_rejection_reads_back_as_last_good() -> None:
    status = read_record(DATA / "promotion" / "status-after.json", STATUS, STATUS_OPTIONAL)
    assert status is not None
    assert (status["phase"], status["serving_fingerprint"]) == ("serving_last_good", "3b8e300979a2efe2")
    assert "rejected by tool_call: auto: HTTP 500" in status["rollback_reason"]
    tool_call = next(g for g in status["gates"] if g["name"] == "tool_call")
    assert tool_call["verdict"] == "pass"
    assert set(tool_call["evidence"]["cases"]) == {"auto", "required", "named", "no_tool", "auto_stream"}


def test_the_history_shows_promotion_then_rejection() -> None:
    text = (DATA / "promotion" / "history.txt").read_text(encoding="utf-8")
    assert "promoted           candidate tiny-chat@3b8e300979a2efe2" in text
    assert "rejected by tool_call: auto: HTTP 500" in text
    assert "rejected by smoke: arithmetic: expected 42; got '16'" in text  # call13's two runs


# --- issue 17: the capture-size rule for draft_model on the V1 runner ---

def test_the_draft_model_capture_agrees_with_the_prediction() -> None:
    plan = build_plan(PROFILES, "tiny-draft")
    predicted = expected_graphs(capture_config(plan.args, plan.env))
    rounded = [2, 4, 8, 16, 32, 48, 64]
    assert predicted == {"PIECEWISE": rounded, "FULL": rounded}
    facts, _ = parse_file(DATA / "spec-capture" / "try-tiny-draft.log")
    assert facts.model_runner == "v1" and facts.capture_sizes == [1, 2, 4, 8, 16, 32, 48, 64]
    assert facts.graphs_captured_by_mode == {"PIECEWISE": 7, "FULL": 7}
    log = (DATA / "spec-capture" / "try-tiny-draft.log").read_text(encoding="utf-8")
    assert "Model Runner V2 does not yet support speculative method 'draft_model'" in log
    assert "Profiling CUDA graph memory: PIECEWISE=7 (largest=64), FULL=7 (largest=64)" in log


def test_graph_capture_passes_on_the_recorded_draft_model_log() -> None:
    plan = build_plan(PROFILES, "tiny-draft")
    facts = parse_file(DATA / "spec-capture" / "try-tiny-draft.log")[0].to_json()
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock, current_facts=dict(facts)), clock, expect=expectations(plan))
    outcome = GraphCaptureGate().check(ctx)
    assert outcome.verdict is Verdict.PASS, outcome.summary
    assert outcome.summary.startswith("graphs PIECEWISE 7/7, FULL 7/7; sizes [2, 4, 8, 16, 32, 48, 64]")
    report = json.loads((DATA / "spec-capture" / "try-tiny-draft.json").read_text(encoding="utf-8"))
    recorded = next(g for g in report["gates"] if g["name"] == "graph_capture")
    assert report["passed"] and recorded["summary"] == outcome.summary.split("\n")[0]


# --- issue 22 step 3: the bench's degenerate detector on the real answers ---

# Cells whose finding reads otherwise than recorded, since the score splits a Latin letter from the CJK
# character it touches (tests/recorded_bench.py `glued`): the loops `…问题I可以回答…` were one unit.
RESCORED = {("1k", c): degenerate_message(12, 12, 0.14) for c in (1, 2, 4, 8)}  # recorded: as low as 0.10
RESCORED[("1k", 64)] = degenerate_message(92, 94, 0.02)  # recorded 92/92: two answers had too few units


def test_the_degenerate_detector_fires_again_on_the_recorded_answers() -> None:
    summary = json.loads((DATA / "bench" / "summary.json").read_text(encoding="utf-8"))
    cells = read_cells(DATA / "bench" / "requests.jsonl.gz")
    assert len(cells) == len(summary["cells"]) == 14
    fired = 0
    for cell in summary["cells"]:
        key = (cell["context"], cell["concurrency"])
        answers = [r for r in cells[key] if r["status"] == 200]
        scores, finding = rescore(answers)
        assert scored_as_recorded(answers, scores), key
        recorded = [f["message"] for f in cell["flags"] if f["flag"] == "degenerate"]
        expected = [RESCORED[key]] if key in RESCORED else recorded
        assert ([finding.message] if finding else []) == expected, key
        fired += finding is not None
    assert fired == summary["flag_counts"]["degenerate"] == 7  # every 1k cell, no short one


# --- issue 18 and 21: the sandboxed try, and the chain's overhead after /health ---

def test_the_sandboxed_try_and_its_history_read_back() -> None:
    report = json.loads((DATA / "unit-sandbox" / "unit-sandbox.json").read_text(encoding="utf-8"))
    verdicts = {g["name"]: g["verdict"] for g in report["gates"]}
    assert verdicts == {"kernel_marker": "pass", "graph_capture": "pass", "health": "pass",
                        "memory_leak": "pass", "tool_call": "fail"}
    scan = History(DATA / "unit-sandbox" / "history.jsonl").scan()
    assert scan.skipped == [] and scan.records


def test_the_chain_after_first_health_on_the_real_vllm() -> None:
    timing = json.loads((DATA / "i21" / "gate-timing.json").read_text(encoding="utf-8"))
    assert timing["verdicts"]["tool_call"] == "fail" and not timing["passed"]
    without = timing["ready_to_verdict_s"] - timing["gate_durations_s"]["tool_call"]
    assert without == pytest.approx(timing["ready_to_verdict_without_tool_call_s"], abs=1e-6)
    assert History(DATA / "i21" / "history.jsonl").scan().skipped == []


@pytest.mark.parametrize(("name", "phase", "after_ready_s"), [
    ("status-tiny-chat.json", "serving", 0.690),  # the promotion: health 0.171, tool_call 0.183, smoke 0.336
    ("status-after.json", "serving_last_good", 0.434),  # last-good again: 0.005, 0.157, 0.272
])
def test_the_gates_after_ready_cost_under_a_second_on_the_real_vllm(
    name: str, phase: str, after_ready_s: float
) -> None:
    """kernel_marker and graph_capture end with startup; health, tool_call (five cases at once) and
    smoke are what the chain adds after the first /health 200 (docs/real-vllm.md, issue 21)."""
    status = read_record(DATA / "promotion" / name, STATUS, STATUS_OPTIONAL)
    assert status is not None and status["phase"] == phase
    durations = {g["name"]: g["duration_s"] for g in status["gates"] if g["verdict"] == "pass"}
    assert list(durations) == ["kernel_marker", "graph_capture", "health", "tool_call", "smoke"]
    after = durations["health"] + durations["tool_call"] + durations["smoke"]
    assert after == pytest.approx(after_ready_s, abs=5e-4)
