"""Failures provoked on the H200 with the real vLLM 0.26.0 (scripts/real-vllm/record-026.sh, raw
`vllm serve`, tests/data/real-vllm-0.26/h200-failures/): the verdict names vLLM's own cause line."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.logfacts import parse_file

CASES = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "h200-failures"


@pytest.mark.parametrize(("case", "kind", "line_no", "message", "proc"), [
    ("kv-small", "kv_cache_too_small", 52,
     "ValueError: To serve at least one request with the model's max seq len (2048), (0.0 GiB KV cache is "
     "needed, which is larger than the available KV cache memory (0.0 GiB).", "EngineCore"),
    ("reasoning", "reasoning_parser", 64,
     "KeyError: \"Reasoning parser 'nope-parser' not found. Available parsers:", "APIServer"),
    ("port", "port_in_use", 38, "OSError: [Errno 98] Address already in use", "APIServer"),
])
def test_failure_is_judged_with_vllms_cause(case: str, kind: str, line_no: int, message: str,
                                            proc: str) -> None:
    facts = parse_file(CASES / case / "vllm.log")[0]
    assert (facts.outcome, facts.failure_kind, facts.failure_line_no) == ("failed", kind, line_no)
    assert facts.failure_message is not None and facts.failure_message.startswith(message)
    assert facts.failure_proc == proc and facts.vllm_version == "0.26.0"


def test_kv_small_was_eager_and_failed_after_profiling() -> None:
    facts = parse_file(CASES / "kv-small" / "vllm.log")[0]
    assert (facts.enforce_eager, facts.cudagraph_captured, facts.failure_phase) == (True, False, "profiling")


def test_eager_start_then_engine_killed() -> None:
    """Eager: no graphs, stated by the config line and `Enforce eager set`; the SIGKILLed engine core
    shows first as 0.26's WARNING `engine core exited unexpectedly`; the API key is not repeated."""
    facts = parse_file(CASES / "eager" / "vllm.log")[0]
    assert (facts.outcome, facts.enforce_eager, facts.cudagraph_mode) == ("ready", True, "NONE")
    assert (facts.cudagraph_captured, facts.graphs_captured) == (False, 0)
    assert facts.died_after_ready is not None and facts.died_after_ready.line_no == 131
    assert "engine core exited unexpectedly" in facts.died_after_ready.line
    assert facts.non_default_args is not None and facts.non_default_args["api_key"] == "***"
    assert "sk-record" not in str(facts.to_json())
