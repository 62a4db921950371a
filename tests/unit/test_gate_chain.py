"""The chain runner and the log-reading gates, driven by a fake clock and a scripted log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gates.chain import SETTLE_MAX_S, SETTLE_QUIET_S, ChainReport, ChainRunner
from gates.context import Expectations, GateContext
from gates.graph_capture import GraphCaptureGate
from gates.kernel_marker import KernelMarkerGate
from gates.outcome import GateResult, Outcome, Verdict
from launcher.logfacts.logfile import parse_file
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


# ---- the chain runner's clock: when a gate is asked, and when its deadline ends the asking ----------
@dataclass
class TimedGate(ScriptedGate):
    """A ScriptedGate that keeps the fake time (since the start) of every ask, and the stop flag it saw."""

    asked_at: list[float] = field(default_factory=list)
    saw_stop: list[bool] = field(default_factory=list)

    def check(self, ctx: GateContext) -> Outcome:
        self.asked_at.append(ctx.clock.monotonic() - 1000.0)
        self.saw_stop.append(ctx.stop_requested())
        return super().check(ctx)


def test_a_waiting_gate_is_asked_every_poll_and_the_last_wait_is_cut_to_the_deadline() -> None:
    ctx, _ = _ctx()
    gate = TimedGate("g", [Outcome.not_yet("not yet")], timeout_s=5.0, poll_s=2.0)
    result = ChainRunner([gate]).run(ctx).results[0]
    assert gate.asked_at == [0.0, 2.0, 4.0, 5.0]  # the last look comes at the deadline, not at 6
    assert (result.verdict, result.duration_s) == (Verdict.FAIL, 5.0)


def test_a_decision_that_comes_at_the_deadline_itself_counts() -> None:
    ctx, _ = _ctx()
    outcomes = [Outcome.not_yet("loading"), Outcome.not_yet("loading"), Outcome.passed("up")]
    gate = TimedGate("g", outcomes, timeout_s=5.0, poll_s=2.5)
    result = ChainRunner([gate]).run(ctx).results[0]
    assert gate.asked_at == [0.0, 2.5, 5.0]
    assert (result.verdict, result.summary) == (Verdict.PASS, "up")


def test_each_gate_has_its_own_deadline_from_the_moment_it_starts() -> None:
    ctx, _ = _ctx()
    first = TimedGate("first", [Outcome.not_yet("a"), Outcome.not_yet("a"), Outcome.passed("a")], timeout_s=5)
    second = TimedGate("second", [Outcome.not_yet("b")], timeout_s=3.0)
    report = ChainRunner([first, second]).run(ctx)
    assert second.asked_at == [2.0, 3.0, 4.0, 5.0]  # started at 2, its deadline at 5, not 3
    assert [r.duration_s for r in report.results] == [2.0, 3.0]


def test_an_exception_after_a_not_yet_is_an_error_at_once_not_a_wait_to_the_deadline() -> None:
    ctx, _ = _ctx()

    @dataclass
    class BreaksLater(TimedGate):
        def check(self, ctx: GateContext) -> Outcome:
            if super().check(ctx).verdict is Verdict.PASS:
                raise KeyError("graphs_captured")
            return Outcome.not_yet("waiting")

    gate = BreaksLater("g", [Outcome.not_yet("x"), Outcome.passed("then it breaks")], timeout_s=100.0)
    result = ChainRunner([gate]).run(ctx).results[0]
    assert (result.verdict, result.duration_s) == (Verdict.ERROR, 1.0)
    assert result.summary == "gate raised KeyError: 'graphs_captured'"
    assert "KeyError" in result.evidence["traceback"] and result.blocks_promotion


def test_progress_is_told_before_and_after_each_gate_that_runs_and_never_of_a_skipped_one() -> None:
    ctx, _ = _ctx()
    told: list[tuple[int, int, str, Outcome | None]] = []
    gates = [
        ScriptedGate("a", [Outcome.passed("fine", detail=1)]),
        ScriptedGate("b", [Outcome.failed("broken")]),
        ScriptedGate("c", [Outcome.passed("never asked")]),
    ]
    ChainRunner(gates, on_progress=lambda *event: told.append(event)).run(ctx)
    assert told == [
        (0, 3, "a", None),
        (0, 3, "a", Outcome(Verdict.PASS, "fine")),  # the verdict and words, not the evidence
        (1, 3, "b", None),
        (1, 3, "b", Outcome(Verdict.FAIL, "broken")),
    ]


def test_after_a_required_failure_every_later_gate_is_skipped_with_its_own_required_flag() -> None:
    ctx, _ = _ctx()
    gates = [
        ScriptedGate("soft", [Outcome.failed("meh")], required=False),
        ScriptedGate("hard", [Outcome.failed("no")]),
        ScriptedGate("later_soft", [Outcome.passed("x")], required=False),
        ScriptedGate("later_hard", [Outcome.passed("x")]),
    ]
    report = ChainRunner(gates).run(ctx)
    assert [(r.name, r.verdict, r.required) for r in report.results] == [
        ("soft", Verdict.FAIL, False),
        ("hard", Verdict.FAIL, True),
        ("later_soft", Verdict.SKIP, False),
        ("later_hard", Verdict.SKIP, True),
    ]
    assert report.results[2].summary == "not run: an earlier required gate failed"
    assert report.results[2].duration_s == 0.0 and gates[3].asked == 0
    assert report.first_failure is not None and report.first_failure.name == "hard"  # not the optional one


def test_an_optional_gates_error_or_deadline_lets_the_chain_go_on() -> None:
    ctx, _ = _ctx()
    gates = [
        BrokenGate("buggy", [], required=False),
        ScriptedGate("slow", [Outcome.not_yet("marker not seen")], required=False, timeout_s=2.0),
        ScriptedGate("hard", [Outcome.passed("ok")]),
    ]
    report = ChainRunner(gates).run(ctx)
    assert [r.verdict for r in report.results] == [Verdict.ERROR, Verdict.FAIL, Verdict.PASS]
    assert report.passed and report.first_failure is None


def test_skips_never_block_and_a_chain_of_nothing_passes() -> None:
    ctx, _ = _ctx()
    report = ChainRunner([ScriptedGate("eager", [Outcome.skipped("eager profile")])]).run(ctx)
    assert report.passed and report.results[0].verdict is Verdict.SKIP
    assert ChainRunner([]).run(ctx) == ChainReport(())
    assert ChainReport(()).passed


@pytest.mark.parametrize(
    ("verdict", "required", "blocks"),
    [
        (Verdict.FAIL, True, True),
        (Verdict.ERROR, True, True),
        (Verdict.NOT_YET, True, True),  # undecided is never a pass
        (Verdict.PASS, True, False),
        (Verdict.SKIP, True, False),
        (Verdict.FAIL, False, False),
        (Verdict.ERROR, False, False),
    ],
)
def test_what_blocks_a_promotion(verdict: Verdict, required: bool, blocks: bool) -> None:
    assert GateResult("g", verdict, "s", {}, 1.0, required=required).blocks_promotion is blocks


def test_a_result_reads_as_json_with_its_duration_to_the_millisecond() -> None:
    result = GateResult("health", Verdict.PASS, "/health 200", {"served": ["m"]}, 12.34567, required=False)
    assert ChainReport((result,)).to_json() == [
        {
            "name": "health",
            "verdict": "pass",
            "summary": "/health 200",
            "evidence": {"served": ["m"]},
            "duration_s": 12.346,
            "required": False,
        }
    ]


def test_a_stop_request_ends_a_wait_at_the_next_look_and_the_gate_could_see_it() -> None:
    ctx, clock = _ctx()
    gate = TimedGate("g", [Outcome.not_yet("capturing")], timeout_s=100.0)
    report = ChainRunner([gate], should_stop=lambda: clock.now >= 1003.0).run(ctx)
    result = report.results[0]
    assert (result.summary, result.duration_s) == ("stopped by a signal while waiting: capturing", 3.0)
    assert gate.saw_stop == [False, False, False, True]


def test_an_engine_death_is_named_before_a_stop_request() -> None:
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock), clock, server=FakeServer(died="killed by SIGKILL"))
    gate = ScriptedGate("g", [Outcome.not_yet("loading")])
    result = ChainRunner([gate], should_stop=lambda: True).run(ctx).results[0]
    assert result.summary == "engine killed by SIGKILL while waiting: loading"


def test_a_failure_or_error_is_told_only_the_exception_logged_during_its_own_gate() -> None:
    clock = FakeClock()
    cause = "(APIServer pid=8814) RuntimeError: Llama3JsonToolParser could not locate the bot token"
    log = ScriptedLog(clock, script=[(0.5, {}, [cause])])
    first = ScriptedGate("first", [Outcome.not_yet("asking"), Outcome.failed("HTTP 500")], required=False)
    broken = BrokenGate("second", [], required=False)
    later = ScriptedGate("third", [Outcome.failed("still 500")], required=False)
    results = ChainRunner([first, broken, later]).run(make_context(log, clock)).results
    assert results[0].evidence["vllm_logged"] == cause.removeprefix("(APIServer pid=8814) ")
    assert "vllm_logged" not in results[1].evidence and "vllm_logged" not in results[2].evidence


def test_an_exception_logged_while_a_gate_raised_is_named_in_the_error_too() -> None:
    clock = FakeClock()
    log = ScriptedLog(clock, current_lines=["(EngineCore pid=3) ValueError: an old one"])

    class LogsThenBreaks(BrokenGate):
        def check(self, ctx: GateContext) -> Outcome:
            log.current_lines.append("(EngineCore pid=3) torch.OutOfMemoryError: CUDA out of memory.")
            return super().check(ctx)

    result = ChainRunner([LogsThenBreaks("g", [])]).run(make_context(log, clock)).results[0]
    assert result.verdict is Verdict.ERROR
    assert result.summary == (
        "gate raised RuntimeError: bug in the gate; vLLM logged: torch.OutOfMemoryError: CUDA out of memory."
    )


def test_a_gate_that_names_its_own_failure_kind_is_not_told_a_logged_exception() -> None:
    clock = FakeClock()
    log = ScriptedLog(clock, script=[(0.5, {}, ["(EngineCore pid=3) ValueError: No available memory"])])
    gate = ScriptedGate(
        "graph_capture",
        [
            Outcome.not_yet("capturing"),
            Outcome.failed("startup failed: No available memory", failure_kind="kv"),
        ],
    )
    result = ChainRunner([gate]).run(make_context(log, clock)).results[0]
    assert result.summary == "startup failed: No available memory" and "vllm_logged" not in result.evidence


# ---- kernel_marker on log lines shaped like the field's (tests/data/logs) ---------------------------
def log_lines(name: str) -> list[str]:
    return (REPO_DATA / "logs" / name).read_text(encoding="utf-8", errors="replace").splitlines()


FALLBACK = log_lines("capture_fallback_1_2.log")  # markers printed bare, lines 12-15
TP4 = log_lines("v011_dp0_tp4_per_rank_kv.log")  # markers behind `(Worker_TPn pid=N) `
WORKER_MARKER = r"^\(Worker_TP\d+ pid=\d+\) IQ4XS_BMMVQ_READY$"


def marker_result(lines: list[str], ready_at: float = 0.0, **table: Any) -> Any:
    """kernel_marker through the chain: the log's lines are all there, ready comes at `ready_at`."""
    clock = FakeClock()
    log = ScriptedLog(clock, current_lines=list(lines), script=[(ready_at, {"outcome": "ready"}, [])])
    gate = KernelMarkerGate({"poll_s": 1.0, "after_ready_s": 5, **table})
    return ChainRunner([gate]).run(make_context(log, clock)).results[0]


def test_a_marker_printed_during_the_load_before_the_chain_began_is_found() -> None:
    bare = marker_result(FALLBACK, patterns=["IQ4XS_BMMVQ_READY"])
    assert bare.verdict is Verdict.PASS and bare.evidence["lines"] == {
        "IQ4XS_BMMVQ_READY": "IQ4XS_BMMVQ_READY"
    }
    prefixed = marker_result(TP4, patterns=["IQ4XS_BMMVQ_READY"])
    assert prefixed.evidence["lines"] == {"IQ4XS_BMMVQ_READY": "(Worker_TP0 pid=3400) IQ4XS_BMMVQ_READY"}


def test_an_anchored_pattern_written_for_prefixed_workers_misses_bare_prints() -> None:
    assert marker_result(TP4, patterns=[WORKER_MARKER]).verdict is Verdict.PASS
    missed = marker_result(FALLBACK, patterns=[WORKER_MARKER])
    assert missed.verdict is Verdict.FAIL
    assert missed.summary == f"cannot confirm the fast path is running: {WORKER_MARKER} not seen"


def test_every_pattern_must_be_seen_and_only_the_missing_are_named() -> None:
    result = marker_result(TP4, patterns=["IQ4XS_BMMVQ_READY", r"tiles=\d+", "MARLIN_READY"])
    assert result.verdict is Verdict.FAIL
    assert result.summary == r"cannot confirm the fast path is running: tiles=\d+, MARLIN_READY not seen"
    assert result.evidence == {
        "missing": [r"tiles=\d+", "MARLIN_READY"],
        "found": {"IQ4XS_BMMVQ_READY": "(Worker_TP0 pid=3400) IQ4XS_BMMVQ_READY"},
    }


def test_the_wait_after_ready_counts_from_when_the_gate_first_saw_ready() -> None:
    late = marker_result(TP4, ready_at=20.0, patterns=["MARLIN_READY"], timeout_s=100)
    assert (late.verdict, late.duration_s) == (Verdict.FAIL, 25.0)
    at_once = marker_result(TP4, ready_at=0.0, patterns=["MARLIN_READY"], after_ready_s=0, timeout_s=100)
    assert (at_once.verdict, at_once.duration_s) == (Verdict.FAIL, 0.0)


def test_patterns_found_in_different_looks_add_up_and_a_late_marker_within_the_wait_passes() -> None:
    clock = FakeClock()
    script = [
        (0.0, {"outcome": "ready"}, ["(Worker_TP0 pid=9) IQ4XS_BMMVQ_READY"]),
        (4.0, {}, ["(Worker_TP0 pid=9) INFO MARLIN_READY tiles=64 (first request)"]),
    ]
    gate = KernelMarkerGate(
        {"patterns": ["IQ4XS_BMMVQ_READY", r"tiles=\d+"], "after_ready_s": 5, "poll_s": 1.0}
    )
    result = ChainRunner([gate]).run(make_context(ScriptedLog(clock, script=script), clock)).results[0]
    assert (result.verdict, result.duration_s) == (Verdict.PASS, 4.0)
    assert result.summary == r"seen: IQ4XS_BMMVQ_READY, tiles=\d+"
    assert result.evidence["lines"][r"tiles=\d+"].endswith("MARLIN_READY tiles=64 (first request)")


def test_kernel_marker_reads_each_line_once_from_where_it_stopped() -> None:
    clock = FakeClock()

    @dataclass
    class CountingLog(ScriptedLog):
        asked_from: list[int] = field(default_factory=list)

        def lines_since(self, position: int) -> tuple[Sequence[str], int]:
            self.asked_from.append(position)
            return super().lines_since(position)

    log = CountingLog(clock, current_lines=TP4[:10], script=[(2.0, {}, TP4[10:20]), (4.0, {}, TP4[20:])])
    gate = KernelMarkerGate(
        {"patterns": ["NEVER_PRINTED"], "after_ready_s": 5, "poll_s": 1.0, "timeout_s": 5}
    )
    ChainRunner([gate]).run(make_context(log, clock))
    gates_reads = log.asked_from[1:-1]  # the runner's own: the gate's start, then what vLLM logged in it
    assert gates_reads[:1] == [0] and sorted(gates_reads) == gates_reads
    assert set(gates_reads) == {0, 10, 20, len(TP4)}


def test_kernel_marker_without_patterns_skips_and_the_chain_still_passes() -> None:
    ctx, _ = _ctx()
    report = ChainRunner([KernelMarkerGate({})]).run(ctx)
    assert report.passed
    assert report.results[0].summary == "no patterns configured ([gates.kernel_marker] patterns)"


# ---- graph_capture on the facts the log parser reads from whole log files --------------------------
def capture_outcome(log: str, expect: Expectations, **table: Any) -> Outcome:
    facts = dict(parse_file(REPO_DATA / "logs" / log)[0].to_json())
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock, current_facts=facts), clock, expect=expect)
    return GraphCaptureGate(table).check(ctx)


TP4_SIZES = (1, 2, 4, 8, 16, 32, 48, 64)


@pytest.mark.parametrize(
    ("max_num_seqs", "verdict", "summary"),
    [
        (32, Verdict.PASS, "graphs PIECEWISE 8/8, FULL 6/6; sizes [1, 2, 4, 8, 16, 32, 48, 64]"),
        (64, Verdict.FAIL, "graphs captured: PIECEWISE 8/8, FULL 6/8"),
        (16, Verdict.FAIL, "graphs captured: PIECEWISE 8/8, FULL 6/5"),
    ],
)
def test_full_decode_graphs_are_counted_up_to_the_profiles_max_num_seqs(
    max_num_seqs: int, verdict: Verdict, summary: str
) -> None:
    """The TP4 log captured PIECEWISE at all 8 sizes and FULL at the 6 up to 32 sequences."""
    expect = Expectations(("fable-9b",), capture_sizes=TP4_SIZES, max_num_seqs=max_num_seqs)
    outcome = capture_outcome("v011_dp0_tp4_per_rank_kv.log", expect)
    assert (outcome.verdict, outcome.summary) == (verdict, summary)


def test_the_fallback_to_1_2_is_refused_whatever_mode_was_asked() -> None:
    asked = Expectations(
        ("fable-27b",), (1, 2, 4, 8, 16, 32), max_num_seqs=32, cudagraph_mode="FULL_DECODE_ONLY"
    )
    outcome = capture_outcome("capture_fallback_1_2.log", asked)
    assert outcome.verdict is Verdict.FAIL
    assert outcome.summary.startswith("capture sizes fell back to [1, 2] (expected [1, 2, 4, 8, 16, 32])")
    assert (
        outcome.evidence["capture_sizes"] == [1, 2]
        and outcome.evidence["cudagraph_mode"] == "FULL_DECODE_ONLY"
    )


def test_the_same_log_passes_a_profile_that_asked_for_exactly_that_capture() -> None:
    asked = Expectations(("fable-27b",), (1, 2), max_num_seqs=32, cudagraph_mode="full_decode_only")
    outcome = capture_outcome("capture_fallback_1_2.log", asked)
    assert (outcome.verdict, outcome.summary) == (Verdict.PASS, "graphs FULL 2/2; sizes [1, 2]")


def test_a_mode_the_profile_did_not_ask_for_fails_unless_downgrades_are_allowed() -> None:
    default_mode = Expectations(("fable-27b",), (1, 2), max_num_seqs=32)
    refused = capture_outcome("capture_fallback_1_2.log", default_mode)
    assert (
        refused.summary
        == "CUDA-graph mode FULL_DECODE_ONLY, asked for FULL_AND_PIECEWISE: downgraded by vLLM"
    )
    allowed = capture_outcome("capture_fallback_1_2.log", default_mode, allow_mode_downgrade=True)
    assert (allowed.verdict, allowed.summary) == (Verdict.PASS, "graphs FULL 2/2; sizes [1, 2]")


@pytest.mark.parametrize("log", ["eager_gb10_no_separators.log", "../real-vllm-0.26/eager/vllm.log"])
def test_an_eager_log_fails_a_graph_profile_and_is_skipped_for_an_eager_one(log: str) -> None:
    graphs = capture_outcome(log, Expectations(("m",), (1, 2, 4)))
    assert graphs.verdict is Verdict.FAIL
    assert graphs.summary.startswith("served in eager mode though the profile did not ask for it")
    eager = capture_outcome(log, Expectations(("m",), (), enforce_eager=True))
    assert eager.verdict is Verdict.SKIP


def test_an_old_log_that_prints_no_graph_count_cannot_pass() -> None:
    """≈0.8.5 prints its 67 sizes but no capture bar: nothing says how many graphs exist."""
    outcome = capture_outcome("v08_literal_ansi_vllmworker.log", Expectations(("m",), None, max_num_seqs=256))
    assert (outcome.verdict, outcome.summary) == (
        Verdict.FAIL,
        "the log does not show how many graphs were captured",
    )


def test_a_log_with_counts_but_no_sizes_cannot_pass() -> None:
    outcome = capture_outcome("two_line_kv_v011_glm.log", Expectations(("m",), None, max_num_seqs=256))
    assert (outcome.verdict, outcome.summary) == (
        Verdict.FAIL,
        "the log does not show the capture sizes: cannot confirm the capture",
    )
    assert outcome.evidence["graphs_captured"] == 102


def test_a_capture_whose_mode_the_log_does_not_print_is_not_taken_for_eager() -> None:
    """Was: no `cudagraph_mode` fact read as the mode NONE (`str(None).upper()`), so a log without a
    mode line (vLLM before the V1 CUDA-graph modes) failed as "served in eager mode"."""
    facts = dict(parse_file(REPO_DATA / "logs" / "docker_compose_v033.log")[0].to_json())
    del facts["cudagraph_mode"]
    clock = FakeClock()
    expect = Expectations(("m",), (1, 2, 4, 8), max_num_seqs=32)
    ctx = make_context(ScriptedLog(clock, current_facts=facts), clock, expect=expect)
    outcome = GraphCaptureGate().check(ctx)
    assert (outcome.verdict, outcome.summary) == (
        Verdict.PASS,
        "graphs PIECEWISE 4/4, FULL 4/4; sizes [1, 2, 4, 8]",
    )


def test_a_log_that_does_not_print_the_mode_is_counted_by_the_mode_asked() -> None:
    outcome = capture_outcome("docker_compose_v033.log", Expectations(("m",), (1, 2, 4, 8), max_num_seqs=32))
    assert (outcome.verdict, outcome.summary) == (
        Verdict.PASS,
        "graphs PIECEWISE 4/4, FULL 4/4; sizes [1, 2, 4, 8]",
    )
    assert outcome.evidence["expected"] == {"PIECEWISE": 4, "FULL": 4}


def test_a_start_that_failed_while_capturing_fails_with_vllms_line() -> None:
    outcome = capture_outcome("fail_oom_capture.log", Expectations(("m",), None))
    assert outcome.verdict is Verdict.FAIL and outcome.evidence == {"failure_kind": "oom"}
    assert outcome.summary.startswith("startup failed: (EngineCore pid=4312) ERROR")
    assert "torch.OutOfMemoryError: CUDA out of memory" in outcome.summary


def test_only_the_last_start_of_a_restarted_journal_is_judged() -> None:
    outcome = capture_outcome("journal_restart_then_ready.log", Expectations(("m",), None, max_num_seqs=512))
    assert outcome.verdict is Verdict.PASS
    assert outcome.summary.startswith("graphs PIECEWISE 51/51, FULL 51/51; sizes [1, 2, 4, 8, 16, 24,")
    tool_parser = capture_outcome(
        "fail_tool_parser_tokenizer.log", Expectations(("m",), None, max_num_seqs=512)
    )
    assert tool_parser.verdict is Verdict.FAIL and tool_parser.summary.startswith("startup failed: ")
