"""The chain runner and the log-reading gates, driven by a fake clock and a scripted log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gates.chain import SETTLE_MAX_S, SETTLE_QUIET_S, ChainRunner
from gates.context import Expectations, GateContext
from gates.graph_capture import GraphCaptureGate
from gates.kernel_marker import KernelMarkerGate
from gates.outcome import Outcome, Verdict
from launcher.logfacts.stream import LogStream
from tests.doubles import FakeClock, FakeServer, ScriptedLog, make_context

REPO_DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass
class ScriptedGate:
    name: str
    outcomes: list[Outcome]
    required: bool = True
    timeout_s: float = 10.0
    poll_s: float = 1.0
    asked: int = 0

    def check(self, ctx: GateContext) -> Outcome:
        self.asked += 1
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]


class BrokenGate(ScriptedGate):
    def check(self, ctx: GateContext) -> Outcome:
        raise RuntimeError("bug in the gate")


def _ctx() -> tuple[GateContext, FakeClock]:
    clock = FakeClock()
    return make_context(ScriptedLog(clock), clock), clock


def test_not_yet_until_the_deadline_becomes_fail_with_the_gates_words() -> None:
    ctx, clock = _ctx()
    gate = ScriptedGate("g", [Outcome.not_yet("marker not seen")], timeout_s=5.0)
    report = ChainRunner([gate]).run(ctx)
    result = report.results[0]
    assert result.verdict is Verdict.FAIL and result.summary == "deadline 5s passed: marker not seen"
    assert 5.0 <= result.duration_s <= 6.0 and not report.passed


def test_an_exception_becomes_an_error_and_later_gates_are_skipped() -> None:
    ctx, _ = _ctx()
    later = ScriptedGate("later", [Outcome.passed("fine")])
    report = ChainRunner([BrokenGate("broken", []), later]).run(ctx)
    assert [r.verdict for r in report.results] == [Verdict.ERROR, Verdict.SKIP]
    assert "RuntimeError: bug in the gate" in report.results[0].summary and later.asked == 0
    assert report.first_failure is not None and report.first_failure.name == "broken"


def test_an_optional_gate_failure_does_not_block() -> None:
    ctx, _ = _ctx()
    gates = [
        ScriptedGate("soft", [Outcome.failed("meh")], required=False),
        ScriptedGate("hard", [Outcome.passed("ok")]),
    ]
    report = ChainRunner(gates).run(ctx)
    assert report.passed and [r.verdict for r in report.results] == [Verdict.FAIL, Verdict.PASS]


def test_engine_death_while_waiting_fails_once_its_log_is_quiet() -> None:
    """Not at the gate's deadline: after the dead engine's log stayed quiet for SETTLE_QUIET_S."""
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock), clock, server=FakeServer(died="exited with code 1"))
    report = ChainRunner([ScriptedGate("g", [Outcome.not_yet("loading")], timeout_s=100)]).run(ctx)
    assert report.results[0].summary == "engine exited with code 1 while waiting: loading"
    assert report.results[0].duration_s == SETTLE_QUIET_S


FREE_MEMORY = (
    "ValueError: Free memory on device cuda:0 (18.71/139.80 GiB) on startup is less than desired GPU"
    " memory utilization (0.2, 27.96 GiB)."
)


def test_a_cause_still_crossing_the_pipe_when_the_death_is_seen_is_named() -> None:
    """Was (CI, a loaded host): the engine core's pidfd fired before its traceback had reached the
    launcher, and the verdict said only `exited with code 1`."""
    clock = FakeClock()
    facts = _failed_start("(EngineCore pid=7) ERROR 11-29 09:23:58 [core.py:1584] ", FREE_MEMORY)
    log = ScriptedLog(clock, script=[(0.5, {}, ["Traceback ..."]), (1.2, facts, ["ValueError: ..."])])
    ctx = make_context(log, clock, server=FakeServer(died="exited with code 1"))
    result = ChainRunner([ScriptedGate("g", [Outcome.not_yet("loading")])]).run(ctx).results[0]
    assert result.summary == f"engine exited with code 1 (free_memory: {FREE_MEMORY}) while waiting: loading"
    assert result.evidence["failure_kind"] == "free_memory"


def test_a_log_that_never_goes_quiet_ends_the_wait_at_its_bound() -> None:
    clock = FakeClock()
    chatter: list[tuple[float, dict[str, Any], list[str]]] = [
        (0.2 * i, {}, [f"line {i}"]) for i in range(1, 100)
    ]
    ctx = make_context(
        ScriptedLog(clock, script=chatter), clock, server=FakeServer(died="exited with code 1")
    )
    result = ChainRunner([ScriptedGate("g", [Outcome.not_yet("loading")], timeout_s=100)]).run(ctx).results[0]
    assert result.summary == "engine exited with code 1 while waiting: loading"
    assert SETTLE_MAX_S <= result.duration_s < SETTLE_MAX_S + SETTLE_QUIET_S


def _failed_start(prefix: str, last_line: str) -> dict[str, object]:
    """The facts the log parser reads from a traceback that ends in `last_line`."""
    stream = LogStream([])
    stream.feed(f"{prefix}Traceback (most recent call last):\n{prefix}{last_line}\n")
    stream.close()
    return dict(stream.facts.to_json())


def test_engine_death_names_the_cause_vllm_logged() -> None:
    clock = FakeClock()
    facts = _failed_start(
        "(EngineCore pid=7) ERROR 11-29 09:23:58 [core.py:1584] ",
        "ValueError: Free memory on device cuda:0 (18.71/139.80 GiB) on startup is less than desired GPU"
        " memory utilization (0.2, 27.96 GiB).",
    )
    log = ScriptedLog(clock, current_facts=facts)
    ctx = make_context(log, clock, server=FakeServer(died="exited with code 1"))
    result = ChainRunner([ScriptedGate("g", [Outcome.not_yet("loading")])]).run(ctx).results[0]
    assert result.summary == (
        "engine exited with code 1 (free_memory: ValueError: Free memory on device cuda:0 (18.71/139.80 GiB)"
        " on startup is less than desired GPU memory utilization (0.2, 27.96 GiB).) while waiting: loading"
    )
    assert result.evidence["failure_kind"] == "free_memory"


def test_kernel_marker_passes_when_the_line_arrives() -> None:
    clock = FakeClock()
    log = ScriptedLog(clock, script=[(3.0, {}, ["(Worker_TP0 pid=9) INFO IQ4XS_BMMVQ_READY tiles=64"])])
    gate = KernelMarkerGate({"patterns": ["IQ4XS_BMMVQ_READY"], "poll_s": 1.0})
    result = ChainRunner([gate]).run(make_context(log, clock)).results[0]
    assert result.verdict is Verdict.PASS and "IQ4XS_BMMVQ_READY" in result.evidence["lines"]


def test_kernel_marker_fails_after_ready_without_the_line() -> None:
    clock = FakeClock()
    log = ScriptedLog(
        clock, script=[(2.0, {"outcome": "ready"}, ["INFO:     Application startup complete."])]
    )
    gate = KernelMarkerGate({"patterns": ["IQ4XS_BMMVQ_READY"], "after_ready_s": 5, "poll_s": 1.0})
    result = ChainRunner([gate]).run(make_context(log, clock)).results[0]
    assert result.verdict is Verdict.FAIL
    assert result.summary == "cannot confirm the fast path is running: IQ4XS_BMMVQ_READY not seen"
    assert result.duration_s < 10


READY = {
    "outcome": "ready",
    "enforce_eager": False,
    "cudagraph_captured": True,
    "cudagraph_mode": "FULL_AND_PIECEWISE",
}


def _judge(facts: dict[str, Any], expect: Expectations | None = None) -> Outcome:
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock, current_facts=facts), clock, expect=expect)
    return GraphCaptureGate().check(ctx)


def test_graph_capture_passes_with_matching_sizes_and_counts() -> None:
    facts = {**READY, "capture_sizes": [1, 2, 4, 8], "graphs_captured_by_mode": {"PIECEWISE": 4, "FULL": 4}}
    outcome = _judge(facts)
    assert outcome.verdict is Verdict.PASS and "PIECEWISE 4/4, FULL 4/4" in outcome.summary


def test_graph_capture_rejects_the_fallback_to_1_2() -> None:
    outcome = _judge({**READY, "capture_sizes": [1, 2], "graphs_captured": 4})
    assert outcome.verdict is Verdict.FAIL and "fell back to [1, 2]" in outcome.summary


def test_graph_capture_rejects_unasked_eager_and_downgraded_mode() -> None:
    eager = _judge({**READY, "enforce_eager": True, "cudagraph_captured": False})
    assert eager.verdict is Verdict.FAIL and "eager mode though the profile did not ask" in eager.summary
    downgraded = _judge({**READY, "cudagraph_mode": "PIECEWISE", "capture_sizes": [1, 2, 4, 8]})
    assert downgraded.verdict is Verdict.FAIL and "downgraded" in downgraded.summary


def test_graph_capture_rejects_a_capture_it_cannot_confirm_or_that_differs() -> None:
    expect = Expectations(served_model_names=("m",), capture_sizes=(1, 2, 4, 8))
    unfinished = _judge({**READY, "cudagraph_captured": False, "capture_sizes": [1, 2, 4, 8]}, expect)
    assert unfinished.summary == "CUDA-graph capture did not complete"
    unseen = _judge(READY, expect)
    assert unseen.summary == "the log does not show the capture sizes: cannot confirm the capture"
    other = _judge({**READY, "capture_sizes": [1, 2, 4]}, expect)
    assert other.summary == "vLLM's config has capture sizes [1, 2, 4], expected [1, 2, 4, 8]"
    assert all(o.verdict is Verdict.FAIL for o in (unfinished, unseen, other))
    # the config line prints the sizes before spec decoding rounds them: they are compared with those
    rounded = Expectations(("m",), capture_sizes=(3, 6), configured_sizes=(1, 2, 4, 8), decode_query_len=3)
    facts = {**READY, "capture_sizes": [1, 2, 4, 8], "model_runner": "V1"}
    spec = _judge({**facts, "graphs_captured_by_mode": {"PIECEWISE": 2, "FULL": 2}}, rounded)
    assert spec.verdict is Verdict.PASS
    assert spec.summary.startswith("graphs PIECEWISE 2/2, FULL 2/2; sizes [3, 6]")


def test_graph_capture_skips_an_eager_profile_and_waits_for_ready() -> None:
    expect = Expectations(served_model_names=("m",), capture_sizes=(), enforce_eager=True)
    assert _judge({}, expect).verdict is Verdict.SKIP
    assert _judge({"graphs_captured": 3}).verdict is Verdict.NOT_YET
    failed = _judge({"outcome": "failed", "failure_line": "CUDA out of memory", "failure_kind": "oom"})
    assert failed.verdict is Verdict.FAIL and "CUDA out of memory" in failed.summary


def test_graph_capture_counts_decode_graphs_up_to_max_num_seqs() -> None:
    expect = Expectations(served_model_names=("m",), capture_sizes=(1, 2, 4, 8, 16), max_num_seqs=4)
    facts = {
        **READY,
        "capture_sizes": [1, 2, 4, 8, 16],
        "graphs_captured_by_mode": {"PIECEWISE": 5, "FULL": 3},
    }
    assert _judge(facts, expect).verdict is Verdict.PASS
    short = {**facts, "graphs_captured_by_mode": {"PIECEWISE": 5, "FULL": 2}}
    outcome = _judge(short, expect)
    assert outcome.verdict is Verdict.FAIL and "FULL 2/3" in outcome.summary


def test_a_cause_on_a_bare_stderr_line_is_named_without_its_prefix() -> None:
    facts = _failed_start(
        "(APIServer pid=7385) ",
        "  Value error, User-specified max_model_len (8192) is greater than the derived",
    )
    clock = FakeClock()
    ctx = make_context(
        ScriptedLog(clock, current_facts=facts), clock, server=FakeServer(died="exited with code 1")
    )
    result = ChainRunner([ScriptedGate("g", [Outcome.not_yet("loading")])]).run(ctx).results[0]
    assert result.summary.startswith(
        "engine exited with code 1 (config: Value error, User-specified max_model_len"
    )


REAL_500 = REPO_DATA / "real-vllm-0.26" / "h200-2" / "promotion" / "engine.log"


def test_a_failed_gate_names_the_exception_vllm_logged_while_it_ran() -> None:
    """vLLM 0.26.0 answered the llama3_json candidate's requests with HTTP 500 and logged why."""
    clock = FakeClock()
    real = [
        line for line in REAL_500.read_text(encoding="utf-8").splitlines() if "APIServer pid=8814" in line
    ]
    log = ScriptedLog(clock, current_lines=["(APIServer pid=1) ValueError: before the gate, not its cause"])
    log.script = [(0.5, {}, real)]  # printed while the gate waits
    gate = ScriptedGate(
        "tool_call", [Outcome.not_yet("asking"), Outcome.failed("auto: HTTP 500")], poll_s=1.0
    )
    result = ChainRunner([gate]).run(make_context(log, clock)).results[0]
    cause = (
        "RuntimeError: Llama3JsonToolParser could not locate the bot token '<|python_tag|>' in the tokenizer."
    )
    assert result.summary == f"auto: HTTP 500; vLLM logged: {cause}"
    assert result.evidence["vllm_logged"] == cause


def test_a_gate_that_passes_or_fails_without_a_logged_exception_keeps_its_words() -> None:
    clock = FakeClock()
    log = ScriptedLog(clock, current_lines=["(APIServer pid=1) ValueError: before the gate"])
    failed = ChainRunner([ScriptedGate("g", [Outcome.failed("no tool call")])]).run(make_context(log, clock))
    assert failed.results[0].summary == "no tool call" and "vllm_logged" not in failed.results[0].evidence


def test_a_logged_cause_is_shortened_between_words_never_mid_word() -> None:
    """0.33's parser registry made `… inkling,in)`: a cut inside a name reads as a broken name."""
    from gates.chain import logged_failure, shortened

    listed = (
        "KeyError: 'invalid tool call parser: hermess (chose from { " + ", ".join(["inkling"] * 60) + " })'"
    )
    kind, cause = logged_failure({"failure_kind": "tool_parser", "failure_message": listed})
    assert (
        kind == "tool_parser" and cause.endswith("inkling…)") and len(cause) <= 300 + len(" (tool_parser: )")
    )
    assert shortened("short enough", 300) == "short enough"
    assert shortened("x" * 400, 300) == "x" * 299 + "…"  # one word: nothing better than a cut
