"""Which cause wins when several lines of a startup say it failed (launcher/logfacts/failure.py ranks,
collector.py keeps the best): worked on the real vLLM 0.26.0 failures recorded on the H200, with lines
taken out, moved or added to make each order the ranking has to decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.logfacts import LogFacts, parse_text
from launcher.logfacts.failure import ENGINE, EXIT, EXPLICIT, SPECIFIC, FailureKind, classify
from launcher.logfacts.lines import parse_segment

REAL = Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26"
# free-memory.log, as recorded: line 20 `EngineCore failed to start.` (the generic engine line, first),
# line 42 the logged `ValueError: Free memory on device …` (the cause), line 71 the same exception on
# the engine's stderr, line 129 the API server's `RuntimeError: Engine core initialization failed.`
FREE = (REAL / "free-memory.log").read_bytes().decode("utf-8").split("\n")
GENERIC_FIRST, CAUSE, CAUSE_AGAIN, API_GENERIC = 20, 42, 71, 129
KV_SMALL = (REAL / "h200-failures" / "kv-small" / "vllm.log").read_bytes().decode("utf-8").split("\n")
KV_CAUSE = 52
TINY = (REAL / "tiny.log").read_bytes().decode("utf-8").split("\n")


def facts_of(lines: list[str]) -> LogFacts:
    return parse_text("\n".join(lines) + "\n")[0]


def line(lines: list[str], no: int) -> str:
    return lines[no - 1]


def without(lines: list[str], *numbers: int) -> list[str]:
    return [text for i, text in enumerate(lines, start=1) if i not in numbers]


def test_the_recorded_lines_are_where_these_tests_say() -> None:
    assert line(FREE, GENERIC_FIRST).endswith("EngineCore failed to start.")
    assert "ValueError: Free memory on device cuda:0" in line(FREE, CAUSE)
    assert "ValueError: Free memory on device cuda:0" in line(FREE, CAUSE_AGAIN)
    assert "RuntimeError: Engine core initialization failed." in line(FREE, API_GENERIC)
    assert "ValueError: To serve at least one request" in line(KV_SMALL, KV_CAUSE)


def test_the_specific_cause_beats_the_generic_line_printed_before_it() -> None:
    facts = facts_of(FREE)
    assert (facts.failure_kind, facts.failure_line_no, facts.failure_proc) == (
        "free_memory",
        CAUSE,
        "EngineCore",
    )


def test_the_first_specific_line_stays_when_the_cause_is_printed_again() -> None:
    # the stderr copy (line 71) has the same rank: it never moves the failure to a later line
    assert facts_of(FREE).failure_line_no == CAUSE
    assert facts_of(without(FREE, CAUSE)).failure_line_no == CAUSE_AGAIN - 1  # the copy, when alone


def test_without_a_named_cause_the_generic_engine_line_is_the_failure() -> None:
    facts = facts_of(without(FREE, CAUSE, CAUSE_AGAIN))
    assert facts.outcome == "failed" and facts.failure_kind == "engine_init"
    assert facts.failure_line_no == GENERIC_FIRST  # the first engine line; later ones rank no higher


def test_an_unknown_exception_becomes_the_message_of_the_generic_failure() -> None:
    """`See root cause above.`: the generic line keeps the kind, the first uncaught exception after a
    traceback is the cause shown to the operator."""
    changed = list(FREE)
    for no in (CAUSE, CAUSE_AGAIN):
        changed[no - 1] = line(FREE, no).split("ValueError:")[0] + "ValueError: a cause no rule knows"
    facts = facts_of(changed)
    assert facts.failure_kind == "engine_init"
    assert (facts.failure_line_no, facts.failure_message) == (CAUSE, "ValueError: a cause no rule knows")


def test_a_specific_cause_after_the_api_servers_generic_line_still_wins() -> None:
    generic_then_cause = [line(FREE, API_GENERIC), line(FREE, CAUSE)]
    facts = facts_of(generic_then_cause)
    assert (facts.failure_kind, facts.failure_line_no) == ("free_memory", 2)


def test_of_two_different_specific_causes_the_first_printed_wins() -> None:
    facts = facts_of([line(KV_SMALL, KV_CAUSE), line(FREE, CAUSE)])
    assert (facts.failure_kind, facts.failure_line_no) == ("kv_cache_too_small", 1)
    facts = facts_of([line(FREE, CAUSE), line(KV_SMALL, KV_CAUSE)])
    assert facts.failure_kind == "free_memory"


def test_a_process_exit_is_the_weakest_evidence_and_never_replaces_a_cause() -> None:
    exit_line = (
        "Nov 29 09:37:30 gpu01 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE"
    )
    facts = facts_of([*FREE, exit_line])
    assert facts.failure_kind == "free_memory"
    only_exit = facts_of([*FREE[: GENERIC_FIRST - 1], exit_line])  # cut before any engine line
    assert (only_exit.outcome, only_exit.failure_kind) == ("failed", "other")
    assert only_exit.failure_line_no == GENERIC_FIRST


def test_a_log_cut_before_any_error_line_has_no_outcome() -> None:
    facts = facts_of(FREE[: GENERIC_FIRST - 1])
    assert facts.outcome is None and facts.failure_kind is None and facts.vllm_version == "0.26.0"


def test_a_failure_line_after_readiness_is_a_requests_error_not_a_failed_start() -> None:
    facts = facts_of([*TINY, line(FREE, CAUSE)])
    assert facts.outcome == "ready" and facts.failure_kind is None and facts.died_after_ready is None


def test_a_restart_describes_the_last_startup_and_remembers_the_failed_one() -> None:
    facts = facts_of([*FREE, *TINY])
    assert facts.outcome == "ready" and facts.failure_kind is None
    assert [(s.outcome, s.failure_kind, s.failure_line_no) for s in facts.startups] == [
        ("failed", "free_memory", CAUSE),
        ("ready", None, None),
    ]


# ---- the rank of each kind of line ----------------------------------------------------------------------


def rank_of(raw: str, after_traceback: bool = False) -> tuple[str, int] | None:
    cause = classify(parse_segment(raw), after_traceback)
    return None if cause is None else (str(cause.kind), cause.rank)


def test_ranks_order_a_named_cause_over_the_engine_over_an_exception_over_an_exit() -> None:
    assert SPECIFIC > ENGINE > EXPLICIT > EXIT
    assert rank_of(line(FREE, CAUSE)) == (FailureKind.FREE_MEMORY, SPECIFIC)
    assert rank_of(line(FREE, GENERIC_FIRST)) == (FailureKind.ENGINE_INIT, ENGINE)
    assert rank_of(line(FREE, API_GENERIC)) == (FailureKind.ENGINE_INIT, ENGINE)
    assert rank_of("(APIServer pid=1) ValueError: x", after_traceback=True) == (FailureKind.OTHER, EXPLICIT)


@pytest.mark.parametrize("no", [21, 22, 23, 41])  # the traceback's header, frames and source lines
def test_a_tracebacks_own_lines_name_no_cause(no: int) -> None:
    assert rank_of(line(FREE, no), after_traceback=True) is None


def test_a_warning_that_names_a_cause_is_not_a_failure() -> None:
    assert rank_of(line(FREE, 8)) is None  # the ulimit warning quotes `OSError: [Errno 24]`
    assert rank_of(line(FREE, CAUSE).replace(" ERROR ", " WARNING ")) is None


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", FailureKind.OOM),
        ("RuntimeError: NCCL error: unhandled system error", FailureKind.DISTRIBUTED),
        ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
         "address. port: 29500, useIPv6: False, code: -98, name: EADDRINUSE, message: address already in use",
         FailureKind.DISTRIBUTED),  # torch's rendezvous port is not the API server's port
        ("huggingface_hub.errors.GatedRepoError: 403 Client Error.", FailureKind.MODEL_NOT_FOUND),
        ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
         FailureKind.GPU_CAPABILITY),
        ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:", FailureKind.COMPILE),
        ("RuntimeError: CUDA error: operation not permitted when stream is capturing",
         FailureKind.CUDA_GRAPH),
        ("vllm serve: error: argument --dtype: invalid choice: 'fp7'", FailureKind.ARGUMENT),
        ("  Value error, User-specified max_model_len (99999) is greater than the derived max_model_len",
         FailureKind.CONFIG),
        ("TimeoutError: Timed out waiting for engine core processes to start.", FailureKind.OTHER),
    ],
)  # fmt: skip
def test_each_rule_names_its_kind_on_an_unprefixed_error_line(message: str, kind: FailureKind) -> None:
    found = rank_of(message)
    assert found is not None and found[0] == kind


def test_the_torch_port_clash_is_distributed_even_though_it_says_address_already_in_use() -> None:
    clash = "torch.distributed.DistStoreError: address already in use"
    assert rank_of(clash) == (FailureKind.DISTRIBUTED, SPECIFIC)
    assert rank_of("OSError: [Errno 98] Address already in use") == (FailureKind.PORT_IN_USE, SPECIFIC)
