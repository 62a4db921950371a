"""The serving watch on the real vLLM 0.26.0 (H100, 2026-12-06, scripts/real-vllm/check-i42.sh with
`I42_ON_WEDGE=log`): the recorded verdicts, and the stall rule run again on the recorded /metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.watch import probes
from launcher.watch.verdict import Kind

RUN = json.loads(
    (
        Path(__file__).resolve().parent.parent / "data" / "real-vllm-0.26" / "watch-i42" / "i42.json"
    ).read_text()
)
MODES: dict[str, Any] = RUN["modes"]


def runs(mode: str, load: str) -> list[dict[str, Any]]:
    return [r for r in MODES[mode]["runs"] if r["load"] == load]


def page(values: dict[str, float]) -> str:
    return "".join(
        f'{name}{{engine="0"}} {value}\n' for name, value in values.items() if name.startswith("vllm:")
    )


def test_an_idle_hang_in_a_logits_processor_was_wedged_by_two_canaries_within_20_s_three_times() -> None:
    idle = runs("soft", "idle")
    assert len(idle) == 3 and all(r["verdict"]["event"] == "wedged" for r in idle)
    assert all(r["verdict"]["check"] == "canary" and "(2 in a row)" in r["verdict"]["detail"] for r in idle)
    assert all(r["health_while_hung"] == ["200"] and r["core_states"] == ["sleeping"] for r in idle)


def test_sigstop_of_the_engine_core_was_wedged_by_its_state_idle_and_under_streams_three_times_each() -> None:
    for load in ("idle", "streams"):
        stopped = runs("stop", load)
        assert len(stopped) == 3
        assert all(r["verdict"]["check"] == "process" for r in stopped)  # seconds: docs/real-vllm.md
        assert all("stopped (state T) for" in r["verdict"]["detail"] for r in stopped)


def test_a_hang_under_streams_froze_every_figure_and_the_rule_calls_it_within_5_s_of_the_fault() -> None:
    """The figures the H100 showed, polled every 0.5 s, through today's stall rule: each recorded hang
    is a stall within 5 s of the flag, and nothing before it is."""
    for run in runs("soft", "streams"):
        progress = probes.EngineProgress(stall_s=3.0)
        called = None
        for poll in run["polls"]:
            said = progress.observe(probes.read_metrics(page(poll["values"]), poll["t"]))
            if said.kind is Kind.STALLED:
                called = poll["t"] - run["fault_at"]
                break
        assert called is not None and 0 < called <= 5, (run["run"], called)


def test_32_clients_queued_on_4_slots_were_no_verdict_though_short_requests_waited_longer_than_a_canary() -> (
    None
):
    queue = MODES["queue"]
    assert queue["verdicts"] == [] and queue["records"] == []
    assert queue["failed"] == 0  # every request answered, none called hung


def test_a_long_chunked_prefill_moved_the_kv_usage_and_no_token_counter() -> None:
    for run in MODES["prefill"]["runs"]:
        series = run["during_prefill"]
        assert (
            "vllm:kv_cache_usage_perc" in run["moved"] and series["vllm:kv_cache_usage_perc"]["changes"] >= 10
        )
        for still in (
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:iteration_tokens_total_count",
        ):
            assert still not in run["moved"] and series[still]["changes"] == 0
