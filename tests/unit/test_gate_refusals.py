"""The gates' decisions before and beside their main judgement: graph_capture's refusals of a log that
cannot confirm the capture and its count by totals, memory_leak's rules about its windows and its data,
tool_call's refusals before it runs a case. The server is a scripted HTTP double answering with vLLM
0.26.0's recorded `/v1/models`; the log is a ScriptedLog of facts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from gates.context import Expectations, HttpReply
from gates.graph_capture import GraphCaptureGate
from gates.memory_leak import MemoryLeakGate, _gap
from gates.outcome import Outcome, Verdict
from gates.tool_call import ToolCallGate
from tests.doubles import FakeClock, ScriptedLog, make_context

MODELS = (
    Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "eager" / "models.json"
).read_text(encoding="utf-8")
READY = {
    "outcome": "ready",
    "enforce_eager": False,
    "cudagraph_captured": True,
    "cudagraph_mode": "FULL_AND_PIECEWISE",
}
SIZES = (1, 2, 4, 8)


@dataclass
class ModelsOnly:
    """Answers GET /v1/models with `models`; any POST is a test failure (the gate must not get there)."""

    models: HttpReply
    asked: list[str] = field(default_factory=list)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        self.asked.append(path)
        return self.models

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        raise AssertionError(f"the gate posted to {path} before it could judge")

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        raise AssertionError(f"the gate streamed from {path} before it could judge")


def graph_outcome(facts: dict[str, Any], **table: Any) -> Outcome:
    clock = FakeClock()
    expect = Expectations(served_model_names=("tiny",), capture_sizes=SIZES, max_num_seqs=32)
    ctx = make_context(ScriptedLog(clock, current_facts=facts), clock, expect=expect)
    return GraphCaptureGate(table).check(ctx)


# ---- graph_capture -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("facts", "summary"),
    [
        (
            {**READY, "cudagraph_captured": False, "capture_sizes": list(SIZES)},
            "CUDA-graph capture did not complete",
        ),
        ({**READY}, "the log does not show the capture sizes: cannot confirm the capture"),
        (
            {**READY, "capture_sizes": [1, 2, 4]},
            "vLLM's config has capture sizes [1, 2, 4], expected [1, 2, 4, 8]",
        ),
        (
            {**READY, "cudagraph_mode": "NONE", "capture_sizes": list(SIZES)},
            "served in eager mode though the profile did not ask for it",
        ),
        ({**READY, "capture_sizes": list(SIZES)}, "the log does not show how many graphs were captured"),
        ({**READY, "capture_sizes": list(SIZES), "graphs_captured": 7}, "graphs captured 7/8"),
        (
            {**READY, "capture_sizes": list(SIZES), "graphs_captured": 9},
            "graphs captured 9/8",
        ),  # more is wrong too
        (
            {**READY, "capture_sizes": list(SIZES), "graphs_captured_by_mode": {"PIECEWISE": 4}},
            "graphs captured: PIECEWISE 4/4, FULL None/4",
        ),
    ],
)
def test_graph_capture_fails_what_it_cannot_confirm(facts: dict[str, Any], summary: str) -> None:
    outcome = graph_outcome(facts)
    assert outcome.verdict is Verdict.FAIL and outcome.summary.startswith(summary), outcome.summary


def test_graph_capture_counts_by_total_when_the_log_gives_no_count_per_mode() -> None:
    """Older vLLM prints one bar for all graphs (docs/logs.md): PIECEWISE 4 and FULL 4 of [1, 2, 4, 8]."""
    outcome = graph_outcome({**READY, "capture_sizes": list(SIZES), "graphs_captured": 8})
    assert outcome.verdict is Verdict.PASS
    assert outcome.summary == "graphs 8/8; sizes [1, 2, 4, 8]; mode FULL_AND_PIECEWISE"
    assert outcome.evidence["expected"] == {"PIECEWISE": 4, "FULL": 4}


def test_a_mode_downgrade_passes_only_when_the_profile_allows_it() -> None:
    facts = {**READY, "cudagraph_mode": "PIECEWISE", "capture_sizes": list(SIZES), "graphs_captured": 4}
    assert (
        graph_outcome(facts).summary
        == "CUDA-graph mode PIECEWISE, asked for FULL_AND_PIECEWISE: downgraded by vLLM"
    )
    allowed = graph_outcome(facts, allow_mode_downgrade=True)
    assert (
        allowed.verdict is Verdict.PASS
        and allowed.summary == "graphs 4/4; sizes [1, 2, 4, 8]; mode PIECEWISE"
    )


def test_the_evidence_carries_what_the_log_said() -> None:
    facts = {
        **READY,
        "capture_sizes": [1, 2],
        "graphs_captured": 4,
        "capture_line": "Graph capturing finished in 1 secs",
    }
    outcome = graph_outcome(facts)
    assert outcome.evidence == {
        "capture_sizes": [1, 2],
        "cudagraph_mode": "FULL_AND_PIECEWISE",
        "graphs_captured": 4,
        "capture_line": "Graph capturing finished in 1 secs",
    }


# ---- memory_leak ---------------------------------------------------------------------------------
def test_too_few_windows_for_the_rule_is_a_problem_of_the_table() -> None:
    too_few = "windows = 3 is too few: baseline_window + consecutive = 5"
    assert MemoryLeakGate.table_problems({"windows": 3}) == [too_few]
    assert MemoryLeakGate.table_problems({"windows": 5}) == []
    assert MemoryLeakGate.table_problems({"windows": "many"}) == []  # the declaration reports a wrong type


def leak_ctx(models: HttpReply) -> tuple[Any, ModelsOnly]:
    clock = FakeClock()
    http = ModelsOnly(models)
    return replace(make_context(ScriptedLog(clock), clock), http=http), http


def test_the_leak_gate_refuses_too_few_windows_before_sending_anything() -> None:
    ctx, http = leak_ctx(HttpReply(200, MODELS))
    outcome = MemoryLeakGate({"windows": 2, "window_s": 1}).check(ctx)
    assert (outcome.verdict, outcome.summary) == (Verdict.FAIL, "windows = 2 is too few: the rule needs 5")
    assert http.asked == []


@pytest.mark.parametrize(
    ("models", "summary"),
    [
        (HttpReply(503, ""), "/v1/models answered 503"),
        (HttpReply(0, "", "connection refused"), "/v1/models answered connection refused"),
    ],
)
def test_a_server_not_answering_its_models_is_not_yet_for_the_leak_gate(
    models: HttpReply, summary: str
) -> None:
    ctx, _ = leak_ctx(models)
    outcome = MemoryLeakGate({"windows": 5, "window_s": 1}).check(ctx)
    assert (outcome.verdict, outcome.summary) == (Verdict.NOT_YET, summary)


def test_the_leak_gates_deadline_follows_its_windows_unless_given() -> None:
    assert MemoryLeakGate({"windows": 6, "window_s": 10}).timeout_s == 6 * 10 * 1.5 + 60
    assert MemoryLeakGate({"windows": 6, "window_s": 10, "timeout_s": 30}).timeout_s == 30


@pytest.mark.parametrize(
    ("rss", "gpu", "gap"),
    [
        ([900.0, 0.0, 910.0, 0.0], None, "rss was 0 MiB at the end of window(s) [2, 4]"),
        ([900.0, 905.0], [4000.0, 0.0], "GPU memory was 0 MiB at the end of window(s) [2]"),
        ([900.0, 905.0], [0.0, 0.0], None),  # NVML names no process of the group: no GPU series, no gap
        ([900.0, 905.0], None, None),
    ],
)
def test_a_series_with_an_empty_sample_is_never_judged(
    rss: list[float], gpu: list[float] | None, gap: str | None
) -> None:
    """A zero means the group was empty (or gone) when sampled: such a series is a failure, not a pass."""
    assert _gap(rss, gpu) == gap


# ---- tool_call -----------------------------------------------------------------------------------
def tool_outcome(models: HttpReply, **table: Any) -> Outcome:
    clock = FakeClock()
    ctx = replace(make_context(ScriptedLog(clock), clock), http=ModelsOnly(models))
    return ToolCallGate(table).check(ctx)


def test_tool_call_waits_for_a_server_that_does_not_list_its_models_yet() -> None:
    outcome = tool_outcome(HttpReply(0, "", "connection refused"))
    assert (outcome.verdict, outcome.summary) == (Verdict.NOT_YET, "/v1/models answered connection refused")


@pytest.mark.parametrize(
    "body", ['{"object": "list", "data": []}', "<html>proxy error</html>", '{"data": [{"name": "x"}]}']
)
def test_tool_call_fails_a_models_answer_that_lists_no_model(body: str) -> None:
    outcome = tool_outcome(HttpReply(200, body))
    assert (outcome.verdict, outcome.summary) == (Verdict.FAIL, "/v1/models lists no model")
    assert outcome.evidence == {"body": body}


def test_tool_call_with_no_case_selected_checks_nothing_and_fails() -> None:
    outcome = tool_outcome(HttpReply(200, MODELS), cases=[])
    assert (outcome.verdict, outcome.summary) == (
        Verdict.FAIL,
        "no tool-call case selected: the gate would check nothing",
    )
