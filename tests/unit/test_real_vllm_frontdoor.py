"""What the real vLLM 0.26.0 did behind the front door (one H100, the tiny random Qwen2, eager; issue 41's
device run, scripts/real-vllm/check-i41.sh): the recorded figures and history in
tests/data/real-vllm-0.26/frontdoor/, held to what the launcher promises and to what the simulator-based
tests assume — so a change of either that the real engine would contradict fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher.supervisor.sleep import VllmSleep
from tests.conftest import REPO

RECORDED = REPO / "tests" / "data" / "real-vllm-0.26" / "frontdoor"


def phases(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDED / f"i41-{name}.json").read_text(encoding="utf-8"))["phases"])


def history(name: str) -> list[dict[str, Any]]:
    lines = (RECORDED / f"history-{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_eight_clients_saw_no_failed_request_and_no_cut_stream_through_any_change() -> None:
    recorded = {**phases("sleep"), **phases("stop")}
    assert set(recorded) == {"rejected_sleep", "promoted_sleep", "rejected_stop"}
    for name, phase in recorded.items():
        clients = phase["clients"]
        assert clients["requests"] >= 150, name  # traffic all along, not a few requests
        assert (clients["failed"], clients["cut"]) == (0, 0), name
        assert phase["drained"]["left"] == 0, name  # nothing in flight when the engine slept or stopped
    assert [recorded[n]["exit"] for n in ("rejected_sleep", "promoted_sleep", "rejected_stop")] == [3, 0, 3]


def test_a_late_rejection_with_sleep_was_woken_and_the_wake_passed_the_greedy_check() -> None:
    rejected = phases("sleep")["rejected_sleep"]
    assert rejected["events"] == ["reload", "switched", "drained", "parked", "start", "gates", "engine_stopped",
                                  "rejected", "woken", "switched"]  # fmt: skip
    assert "wake_failed" not in rejected["events"]  # the real engine answered as before its sleep
    records = history("sleep")
    reason = next(r["reason"] for r in records if r["event"] == "rejected")
    assert "rejected by kernel_marker" in reason and "Using FLASH_ATTN attention backend not seen" in reason
    held = [r for r in records if r["event"] == "switched" and r["port"] is None]
    assert held and all(r["door_problem"] is None for r in held)  # the door held while nothing served


def test_the_first_sleep_of_an_engine_is_marked_and_sleeps_are_fractions_of_a_second_here() -> None:
    parked = [r for r in history("sleep") if r["event"] == "parked"]
    assert [r["first"] for r in parked] == [True, False]  # the same engine slept twice
    assert all(r["gpu_mib_asleep"] < r["gpu_mib_awake"] / 10 for r in parked)  # 782 of 16,746 MiB


def test_with_park_stop_last_good_started_cold_while_clients_waited_at_the_door() -> None:
    events = phases("stop")["rejected_stop"]["events"]
    assert events[events.index("rejected") :] == ["rejected", "rollback", "start", "gates", "serving_last_good",
                                                  "switched"]  # fmt: skip


def test_keep_s_resumed_tokens_differ_from_an_uninterrupted_run_so_the_launcher_never_asks_for_keep() -> None:
    recorded = json.loads((RECORDED / "i41-sleep.json").read_text(encoding="utf-8"))
    keep = recorded["keep"]
    assert recorded["keep_routes"] == {"sleep": 200, "wake_up": 200}
    assert keep["same"] == [False, False, False, False]  # greedy, 1,200 tokens, slept with mode=keep
    assert keep["resumed_chars"] == keep["reference_chars"]  # resumed to the end, but otherwise
    assert all(0 < at < n for at, n in zip(keep["first_difference_at"], keep["reference_chars"], strict=True))
    # What the launcher sends: vLLM's default mode (abort), after a drain has left nothing to abort.
    source = Path(VllmSleep.sleep.__code__.co_filename).read_text(encoding="utf-8")
    assert '"/sleep?level=1"' in source and "mode=keep" not in source


def test_the_sleep_and_wake_lines_are_the_ones_the_simulator_prints() -> None:
    log = (RECORDED / "engine-sleep.log").read_text(encoding="utf-8")
    simulator = "".join(
        (REPO / "vllm_sim" / f).read_text(encoding="utf-8") for f in ("sleep_mode.py", "dev_routes.py")
    )
    for words in (
        "Using sleep-mode backend: cumem",
        "seconds to fall asleep.",
        "wake up the engine with tags: ",
    ):
        assert words in log and words in simulator, words
