"""The fourth H200 session (issues 31 and 32, vLLM 0.26.0, tiny-chat and a random 2.54 B Qwen2),
re-judged from what it recorded in tests/data/real-vllm-0.26/h200-4/ (docs/real-vllm.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launcher.watch import probes
from launcher.watch.verdict import Check, Judge, Kind, Observation, Rules, Verdict

DATA = Path(__file__).resolve().parent.parent / "data" / "real-vllm-0.26" / "h200-4"
BOUND_S = 2 * 15 + 10  # wedge_after x canary_interval_s + canary_timeout_s, the defaults


def load(*parts: str) -> Any:
    return json.loads(DATA.joinpath(*parts).read_text())


CORE = load("i31-core", "i31.json")
API, KILL = load("i31-api-kill", "i31.json")


@pytest.mark.parametrize("run", CORE, ids=lambda r: f"core-{r['pid']}")
def test_a_stopped_engine_core_kept_health_200_metrics_flat_and_was_wedged_in_bound(
    run: dict[str, Any],
) -> None:
    wedged = run["wedged"]
    assert run["verdict_s"] <= BOUND_S and wedged["action"] == "restart"
    assert wedged["process"] == f"VLLM::EngineCore pid {run['pid']} is stopped (state T)"
    while_stopped = [h for h in run["health"] if h[0] < run["verdict_s"]]
    assert while_stopped and all(
        code == 200 and ms < 50 for _, code, ms in while_stopped
    )  # vLLM says healthy
    frozen = {json.dumps(m[1], sort_keys=True) for m in run["metrics"] if m[0] < run["verdict_s"]}
    assert len(frozen) == 1 and json.loads(frozen.pop())["vllm:num_requests_running"] == 0  # nothing counted
    assert run["completion"]["error"] == "ReadTimeout"  # the one signal to trust
    assert run["recovered"]["how"] == "restart" and run["serving_again_s"] > run["verdict_s"]
    assert "VLLM::EngineCore pid" in run["incident"] and "wchan do_signal_stop" in run["incident"]


def test_the_recorded_metrics_and_timeouts_give_the_same_verdict_again() -> None:
    """The watch's rules on what the H200 showed: flat figures with nothing running are no stall,
    and two canaries past their deadline are wedged."""
    run = CORE[0]
    progress, judge = probes.EngineProgress(stall_s=3.0), Judge(Rules(wedge_after=2))
    for at, figures in run["metrics"]:
        text = "".join(f'{name}{{engine="0"}} {value}\n' for name, value in figures.items())
        judge.observe(progress.observe(probes.read_metrics(text, at)))
    assert judge.judgement().verdict is Verdict.SERVING  # the metrics alone said nothing was wrong
    for at in (11.0, 22.0):
        judge.observe(
            Observation(Check.CANARY, Kind.TIMEOUT, at, "canary: no answer within 10 s", waited_s=10.0)
        )
    assert judge.judgement().verdict is Verdict.WEDGED


def test_a_stopped_api_server_answers_nothing_and_was_wedged_in_bound() -> None:
    assert API["target"] == "api" and API["verdict_s"] <= BOUND_S
    assert API["wedged"]["process"] == f"API server pid {API['pid']} is stopped (state T)"
    assert all(code == 0 for t, code, _ in API["health"] if t < API["verdict_s"])  # not even /health


def test_a_killed_engine_core_is_named_with_its_signal_by_the_process_connector() -> None:
    died = KILL["died"]
    assert died["how"] == f"VLLM::EngineCore pid {KILL['pid']} killed by SIGKILL"
    assert died["source"] == "process connector"  # the API server reaped it before /proc could be read
    assert KILL["exit"] == 5


def runs(case: str) -> list[dict[str, Any]]:
    [found] = list(DATA.joinpath("i32", case).glob("i32-*.json"))
    return list(json.loads(found.read_text())["runs"])


@pytest.mark.parametrize(("sleep", "stop"), [("tiny-sleep", "tiny-stop"), ("big-sleep", "big-stop")])
def test_a_rejected_change_beside_a_sleeper_costs_seconds_where_a_cold_start_cost_a_minute(
    sleep: str, stop: str
) -> None:
    parked, stopped = runs(sleep), runs(stop)
    assert len(parked) == 3 and all(r["set_exit"] == 3 for r in parked + stopped)
    beyond = sorted(r["beyond_candidate_s"] for r in parked)
    cold = stopped[0]["beyond_candidate_s"]
    assert beyond[-1] <= 2.0 and beyond[1] <= 0.02 * cold  # the goals: ≤ 2 s, ≤ 2% of the cold start
    for run in parked:
        assert run["events"] == ["reload", "parked", "start", "gates", "engine_stopped", "rejected", "woken"]
        assert run["gpu_mib_asleep"] < 2048 < run["gpu_mib_awake"]  # only the residue stays
        assert run["greedy_same"] and run["greedy_before"]
    assert "parked" not in stopped[0]["events"] and cold > 30


def test_the_sleeper_of_several_gib_moved_its_weights_to_host_ram_once() -> None:
    first, later = runs("big-sleep")[0], runs("big-sleep")[1]
    assert first["host_available_gib_before"] - first["host_available_gib_parked"] > 4  # 5.08 GB of weights
    assert later["sleep_s"] < first["sleep_s"]  # the first sleep allocates the host copy
    log = DATA.joinpath("i32", "big-sleep", "engine-excerpt.log").read_text()
    assert "Sleep mode freed" in log and "Resetting prefix cache..." in log
