"""What the real vLLM 0.26.0 did with changes tried beside production (one H100, the tiny random
Qwen2, eager, production and candidate each at gpu_memory_utilization 0.3; issue 45's device run,
scripts/real-vllm/check-i45.sh and `check-i45.sh exits`): the recorded figures, history and NVML
samples in tests/data/real-vllm-0.26/beside/, held to what the launcher promises — so a change that
the real engine and the real NVML would contradict fails here."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tests.conftest import REPO

RECORDED = REPO / "tests" / "data" / "real-vllm-0.26" / "beside"


def run(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDED / name).read_text(encoding="utf-8")))


def history() -> list[dict[str, Any]]:
    lines = (RECORDED / "history-beside.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def phase(name: str) -> dict[str, Any]:
    return dict(run("i45-beside.json")["phases"][name])


def samples_between(since: str, until: str) -> list[dict[str, Any]]:
    """The NVML samples of GPU 0 taken between two history records of the run."""

    def epoch(stamp: str) -> float:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()

    start, end = epoch(since), epoch(until)
    return [s["gpus"][0] for s in run("i45-beside.json")["gpu_samples"] if start <= s["t"] <= end]


def test_eight_clients_saw_no_failed_request_no_cut_stream_and_no_hold_through_either_change() -> None:
    for name, exit_code in (("rejected_late", 3), ("promoted", 0)):
        recorded = phase(name)
        clients = recorded["clients"]
        assert recorded["exit"] == exit_code, name
        assert clients["requests"] >= 1000 and (clients["failed"], clients["cut"]) == (0, 0), name
    held = [r for r in history() if r["event"] == "switched" and r.get("port") is None]
    assert [r["why"] for r in held] == ["SIGTERM received"]  # the door held only when the run ended


def test_a_late_rejection_beside_production_left_production_the_same_process_untouched() -> None:
    rejected = phase("rejected_late")
    assert rejected["events"] == [
        "reload",
        "beside",
        "start",
        "gates",
        "engine_stopped",
        "rejected",
        "power_restored",
    ]
    assert rejected["engine_pid_before"] == rejected["engine_pid_after"] != rejected["candidate_pid"]
    records = rejected["records"]
    assert (
        records["rejected"]["beside"] is True and "rejected by kernel_marker" in records["rejected"]["reason"]
    )
    assert records["drained"] is None and rejected["parked"] is None  # never held, drained or put to sleep


def test_a_promotion_beside_production_switched_then_drained_production_with_nothing_left() -> None:
    promoted = phase("promoted")
    assert promoted["events"] == ["reload", "beside", "start", "gates", "promoted", "switched", "drained",
                                  "engine_stopped", "power_restored"]  # fmt: skip
    assert promoted["drained"]["left"] == 0 and promoted["engine_pid_after"] == promoted["candidate_pid"]


def test_both_engines_held_the_gpu_only_during_the_trial_and_the_power_limit_was_lowered_only_then() -> None:
    assert run("i45-beside.json")["nvml"]["gpus"][0]["set"] == "permitted"  # root on the GPU machine
    for name in ("rejected_late", "promoted"):
        records = phase(name)["records"]
        during = samples_between(records["beside"]["ts"], records["power_restored"]["ts"])
        assert {s["limit_w"] for s in during[2:]} == {400.0}, name  # lowered before the candidate started
        both = [s for s in during if len(s["pids"]) == 2]
        assert both and max(s["used_mib"] for s in both) < 0.7 * both[0]["total_mib"], name  # 2 × 0.3
    samples = run("i45-beside.json")["gpu_samples"]
    assert samples[-1]["gpus"][0]["limit_w"] == 700.0  # and back after the run


def test_a_sigkilled_launchers_power_limit_came_back_from_its_record_at_the_next_start() -> None:
    killed = run("i45-exits.json")["killed"]
    assert (killed["during_w"], killed["after_kill_w"], killed["after_restart_w"]) == (400.0, 400.0, 700.0)
    assert json.loads(killed["record"])["gpus"][0]["was_w"] == 700.0
    assert killed["power_restored"]["after"] == "a launcher that was killed"
    assert killed["power_restored"]["problems"] == []


def test_a_change_the_gpu_cannot_hold_beside_production_fell_back_with_nvmls_figures() -> None:
    no_room = run("i45-exits.json")["no_room"]
    skipped = no_room["skipped"]
    assert no_room["exit"] == 0 and skipped["instead"] == "stop"
    assert "< needed 59.38 GiB" in skipped["reason"]  # 0.75 × the 79.18 GiB CUDA reports
    assert "held by this launcher's engines kept on it (24.27 GiB)" in skipped["reason"]
