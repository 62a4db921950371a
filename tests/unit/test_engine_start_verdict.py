"""`engine_start`: an engine that exits before it is ready has its own verdict, led by vLLM's cause
sentence — whole, on recorded logs of the real vLLM — with a did-you-mean where vLLM listed names."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.chain import SKIPPED_AFTER_FAILURE, ChainReport
from gates.outcome import GateResult, Verdict
from launcher.logfacts import parse_file
from launcher.logfacts.cause import cause_text
from launcher.supervisor.start_verdict import (
    early_exit_of,
    rejection_reason,
    render_report,
    unjudged_in_status,
)

DATA = Path(__file__).resolve().parents[1] / "data"
LOG = Path("/state/profiles/svc/logs/engine.log")


def failure_message(relative: str) -> str:
    facts = parse_file(DATA / relative, events=False)[0]
    assert facts.failure_message is not None, relative
    return facts.failure_message


@pytest.mark.parametrize(
    ("log", "sentence", "refused", "suggestion"),
    [
        ("logs/fail_tool_parser_invalid.log", "invalid tool call parser: hermess", "hermess", "hermes"),
        ("real-vllm-0.26/h200-failures/reasoning/vllm.log", "Reasoning parser 'nope-parser' not found.",
         "nope-parser", None),
        ("logs/fail_tool_parser_registered.log",
         "Error: --enable-auto-tool-choice requires tool_parser:'qwen3_xml' which has not been registered",
         None, None),
        ("real-vllm-0.26/free-memory.log",
         "Free memory on device cuda:0 (18.77/139.8 GiB) on startup is less than desired GPU memory "
         "utilization (0.2, 27.96 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
         "processes.", None, None),
        ("logs/fail_port_in_use.log", "[Errno 98] Address already in use", None, None),
    ],
)  # fmt: skip
def test_the_cause_sentence_of_recorded_failures(log: str, sentence: str, refused: str | None,
                                                 suggestion: str | None) -> None:  # fmt: skip
    cause = cause_text(failure_message(log))
    assert (cause.sentence, cause.refused, cause.did_you_mean) == (sentence, refused, suggestion)


def test_the_registry_vllm_listed_is_what_the_suggestion_picks_from() -> None:
    listed = cause_text(failure_message("logs/fail_tool_parser_invalid.log"))
    assert len(listed.choices) == 58 and "hermes" in listed.choices  # 0.33's registry (vllm-facts.md §7)
    reasoning = cause_text(failure_message("real-vllm-0.26/h200-failures/reasoning/vllm.log"))
    assert len(reasoning.choices) == 28 and "qwen3" in reasoning.choices  # 0.26's
    assert cause_text(
        "KeyError: \"Reasoning parser 'qwen4' not found. Available parsers: qwen3, glm45\""
    ).did_you_mean == ("qwen3")


@pytest.mark.parametrize(
    "log",
    [
        "real-vllm-0.26/h200-failures/kv-small/vllm.log",
        "logs/fail_kv_too_small_crlf.log",
        "logs/fail_oom_load_v1.log",
    ],
)
def test_a_long_cause_is_never_cut(log: str) -> None:
    """The 400-character KV-cache sentence stays whole: only the exception class goes."""
    message = failure_message(log)
    sentence = cause_text(message).sentence
    assert len(sentence) > 200 and message.endswith(sentence)
    assert message[: len(message) - len(sentence)] in ("ValueError: ", "")


def test_an_engine_that_exited_before_ready_gets_the_engine_start_verdict() -> None:
    facts = {"outcome": "failed", "failure_kind": "tool_parser",
             "failure_message": failure_message("logs/fail_tool_parser_invalid.log")}  # fmt: skip
    early = early_exit_of("exited with code 1", facts, LOG)
    assert early is not None
    reason = rejection_reason(
        "svc@e293da75", "kernel_marker", "engine exited with code 1 while waiting", early
    )
    assert reason.startswith("svc@e293da75 rejected at engine_start: invalid tool call parser: hermess")
    assert "did you mean hermes?" in reason and "kernel_marker" not in reason and "chose from" not in reason
    assert "tool_parser" in reason and "exited with code 1" in reason and str(LOG) in reason
    assert early.to_json()["did_you_mean"] == "hermes"


def test_the_gates_verdict_stands_for_an_engine_that_was_ready_or_is_still_starting() -> None:
    assert early_exit_of("exited with code 1", {"outcome": "ready"}, LOG) is None  # died after ready
    assert early_exit_of(None, {"outcome": None}, LOG) is None  # still loading: a deadline, not a start
    reason = rejection_reason("svc@1", "health", "/health 503", None)
    assert reason == "svc@1 rejected by health: /health 503"


def test_an_exit_with_no_cause_in_the_log_says_so() -> None:
    early = early_exit_of("killed by SIGSEGV", {"outcome": None}, None)
    assert early is not None
    assert early.describe().startswith("vLLM logged no cause the launcher knows (vLLM killed by SIGSEGV")
    failed_first = early_exit_of(
        None, {"outcome": "failed", "failure_message": "OSError: [Errno 98] x"}, None
    )
    assert failed_first is not None and "startup failed" in failed_first.describe()


def _result(name: str, verdict: Verdict, summary: str, **evidence: object) -> GateResult:
    return GateResult(name, verdict, summary, dict(evidence), 0.5, required=True)


DIED = _result("graph_capture", Verdict.FAIL, "engine exited with code 1 while waiting: no capture line",
               failure_kind="tool_parser")  # fmt: skip


def test_beside_the_engine_start_verdict_the_gates_it_left_unjudged_are_not_run() -> None:
    """One verdict: a gate that passed before vLLM exited stands; the one that was waiting and those
    the chain skipped after it are not run; a gate skipped for its own reason stays skipped."""
    report = ChainReport((
        _result("kernel_marker", Verdict.PASS, "FABLE_KERNELS_READY seen"),
        DIED,
        _result("health", Verdict.SKIP, SKIPPED_AFTER_FAILURE),
        _result("smoke", Verdict.SKIP, "no prompts configured"),
    ))  # fmt: skip
    early = early_exit_of("exited with code 1", {"outcome": "failed"}, LOG)
    lines = render_report(report, "launch try svc", early).splitlines()
    assert [line.split()[0] for line in lines[1:5]] == ["PASS", "----", "----", "skip"]
    assert lines[2].endswith("not run: vLLM exited before it was ready") and "while waiting" not in lines[2]
    assert lines[-1].startswith("  → rejected at engine_start: vLLM logged no cause")
    assert render_report(report, "t").splitlines()[2].split()[0] == "FAIL"  # without it, the gate's verdict


def test_status_shows_not_run_only_where_the_engine_died_while_a_gate_waited() -> None:
    died = [DIED.to_json(), _result("health", Verdict.SKIP, SKIPPED_AFTER_FAILURE).to_json()]
    reason = "candidate svc@1 rejected at engine_start: x (vLLM exited with code 1 before it was ready)"
    assert unjudged_in_status(died, reason) == [True, True]
    assert unjudged_in_status(died, "candidate svc@1 rejected by graph_capture: x") == [False, False]
    own = [_result("health", Verdict.FAIL, "/health 503").to_json()]  # last-good's own failure
    assert unjudged_in_status(own, reason) == [False]
