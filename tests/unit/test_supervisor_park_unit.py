"""Park as a unit (launcher/supervisor/park.py) on the rig's fake clock: the seconds a sleep and a
wake took and where a wake's went (its timeline), the deadline of the wait for the rejected
candidate's GPU memory, when parking is skipped and why, and the swap back to an engine kept asleep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.supervisor.history import Event
from tests.engine_double import Script, passes
from tests.supervisor_rig import PORT, Rig

PARK = {"park": "sleep", "park_port": PORT + 1, "wake_timeout_s": 10}
GIB = 1 << 30
WEIGHTS = "INFO 11-29 06:26:59 [gpu_model_runner.py:2653] Model loading took 5.08 GiB and 3.1 seconds"


def parked_rig(tmp_path: Path, *log: str, **supervisor: object) -> Rig:
    rig = Rig(tmp_path, passes(*log), passes(), passes(), supervisor={**PARK, **supervisor})
    rig.serve(rig.candidate())
    return rig


def test_a_sleep_s_seconds_are_the_clock_s_and_the_candidate_moves_to_the_other_port(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    serving = rig.state.serving
    assert serving is not None
    rig.sleeps.on_call = lambda name: rig.clock.sleep(2.5 if name == "sleep" else 0.25)
    moved = rig.parker.park_for(rig.candidate(max_num_seqs=8))
    assert moved is not None and moved.port == PORT + 1
    assert rig.state.parked is serving and rig.state.serving is None
    parked = rig.record(Event.PARKED)
    assert parked["seconds"] == 2.5  # the sleep call; is_sleeping is a GET, no clock step
    assert rig.sleeps.calls == [("sleep", PORT), ("is_sleeping", PORT)]


def test_a_sleep_that_frees_too_little_gpu_memory_is_no_park_and_the_engine_is_woken(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    serving = rig.state.serving
    assert serving is not None
    pid = rig.engine(serving).pid
    assert pid is not None
    rig.gpu_memory.by_pid[pid] = 40 * GIB

    def sleep_frees_a_quarter(name: str) -> None:
        if name == "sleep":
            rig.gpu_memory.by_pid[pid] = 30 * GIB

    rig.sleeps.on_call = sleep_frees_a_quarter
    assert rig.parker.park_for(rig.candidate(max_num_seqs=8)) is None
    skipped = rig.record(Event.PARK_SKIPPED)
    assert skipped["reason"].startswith("sleep failed: still holds 30720 MiB of GPU memory (40960 MiB awake)")
    assert ("wake", PORT) in rig.sleeps.calls and rig.state.serving is serving and rig.state.parked is None


def test_an_engine_started_without_sleep_mode_is_not_parked(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    rig.serve(rig.candidate())  # park = "stop": no --enable-sleep-mode in its argv
    assert rig.parker.park_for(rig.candidate(supervisor=PARK)) is None
    assert rig.sleeps.calls == [] and Event.PARK_SKIPPED not in rig.events()  # the profile said stop


def test_a_host_that_cannot_hold_the_weights_does_not_park(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = parked_rig(tmp_path, WEIGHTS)
    monkeypatch.setattr(
        "launcher.supervisor.park.host_available_gib", lambda: 6.0
    )  # the host's RAM, a number
    assert rig.parker.park_for(rig.candidate(max_num_seqs=8)) is None
    reason = rig.record(Event.PARK_SKIPPED)["reason"]
    assert reason.startswith("host RAM: 6.0 GiB available cannot hold the 5.1 GiB of weights")
    assert rig.sleeps.calls == []


def test_where_a_change_starts_is_known_before_anything_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reload's preflight judges the port the candidate will really start on (issue 42: a held
    park_port is a refusal while what serves still serves, not a rejection after parking)."""
    rig = parked_rig(tmp_path, WEIGHTS)
    change = rig.candidate(max_num_seqs=8)
    assert rig.parker.destination(change, beside=False).port == PORT + 1  # parked for: the other port
    assert rig.parker.destination(change, beside=True).port == PORT + 1  # tried beside: the same
    monkeypatch.setattr("launcher.supervisor.park.host_available_gib", lambda: 6.0)
    assert rig.parker.destination(change, beside=False).port == PORT  # not parked: stopped, its own port
    assert rig.sleeps.calls == [] and rig.events().count(Event.PARK_SKIPPED) == 0  # judged, nothing done


def test_the_wake_waits_for_the_rejected_candidate_s_memory_until_its_deadline(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    rig.gpu_memory.by_pid[99_999] = 8 * GIB  # the rejected candidate's, never let go
    began = rig.clock.now
    assert rig.parker.wake_parked([99_999], "rejected by health")
    assert rig.clock.now - began == pytest.approx(10.0, abs=0.11)  # wake_timeout_s, in 0.1 s polls
    assert rig.state.serving is not None and rig.state.on_last_good
    assert rig.record(Event.WOKEN)["port"] == PORT


def parked_with_memory_back_on_the_third_read(tmp_path: Path) -> Rig:
    """Parked for a candidate whose 8 GiB (pid 99 999) are let go at the wake's first memory poll
    after the park's two reads (awake, asleep): the wake waits two polls of 0.1 s."""
    rig = parked_rig(tmp_path)
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    rig.gpu_memory.by_pid[99_999] = 8 * GIB

    def let_go_on_the_third_read() -> None:
        if rig.gpu_memory.reads >= 3:
            rig.gpu_memory.by_pid[99_999] = 0

    rig.gpu_memory.reads = 0
    rig.gpu_memory.on_read = let_go_on_the_third_read
    return rig


def test_the_wake_goes_on_as_soon_as_the_memory_is_back(tmp_path: Path) -> None:
    rig = parked_with_memory_back_on_the_third_read(tmp_path)
    began = rig.clock.now
    assert rig.parker.wake_parked([99_999], "rejected")
    assert rig.clock.now - began == pytest.approx(0.2)  # two polls of 0.1 s, then the wake


def phases(record: dict[str, Any]) -> dict[str, float]:
    """A wake's phases in the order recorded, each checked contiguous: together they are the record's
    seconds (both kept to the millisecond)."""
    timeline = record["timeline"]
    assert timeline["kind"] == "wake"
    got = {p["name"]: p["seconds"] for p in timeline["phases"]}
    assert round(sum(got.values()), 3) == timeline["total_seconds"] == record["seconds"]
    return got


def steps(rig: Rig, **seconds: float) -> None:
    """Each call of the sleep seam moves the fake clock by its step (`wake`, `reset`, `greedy`)."""
    rig.sleeps.on_call = lambda name: rig.clock.sleep(seconds.get(name, 0.0))


def test_a_wake_records_its_phases_in_order_on_the_clock(tmp_path: Path) -> None:
    rig = parked_with_memory_back_on_the_third_read(tmp_path)
    steps(rig, wake=1.5, reset=0.25, greedy=0.05)
    rig.engines.while_gating.append(lambda: rig.clock.sleep(0.7))  # the re-gate
    assert rig.parker.wake_parked([99_999], "rejected by health")
    woken = rig.record(Event.WOKEN)
    assert phases(woken) == {"wait_memory": 0.2, "wake_up": 1.5, "checks": 0.3, "gates": 0.7}
    assert woken["seconds"] == 2.7
    assert [p["label"] for p in woken["timeline"]["phases"]][1] == "POST /wake_up"


def test_a_failed_wake_is_recorded_with_the_clock_s_seconds_and_the_sleeper_stopped(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    sleeper = rig.state.serving
    assert sleeper is not None
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    rig.sleeps.fail["wake"] = "POST /wake_up: no answer within 10 s"
    steps(rig, wake=10.0)
    assert not rig.parker.wake_parked([], "rejected")
    failed = rig.record(Event.WAKE_FAILED)
    assert failed["reason"] == "POST /wake_up: no answer within 10 s" and failed["seconds"] == 10.0
    assert phases(failed) == {"wait_memory": 0.0, "wake_up": 10.0}  # what it got through, the failed one last
    assert rig.engine(sleeper).stops and rig.state.parked is None and rig.state.serving is None


def test_a_wake_that_fails_its_checks_keeps_the_phases_it_got_through(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    rig.sleeps.fail["reset"] = "POST /reset_prefix_cache: 500"
    steps(rig, wake=2.0, reset=0.5)
    assert not rig.parker.wake_parked([], "rejected")
    failed = rig.record(Event.WAKE_FAILED)
    assert failed["reason"] == "POST /reset_prefix_cache: 500"
    assert phases(failed) == {"wait_memory": 0.0, "wake_up": 2.0, "checks": 0.5}


def test_a_wake_that_fails_its_re_gate_keeps_all_its_phases(tmp_path: Path) -> None:
    regate = (("health", True, "200 OK"), ("tool_call", False, "0/2 cases"))
    rig = Rig(tmp_path, Script(regate=regate), passes(), supervisor=PARK)  # the sleeper's re-gate fails
    rig.serve(rig.candidate())
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    steps(rig, wake=2.0)
    rig.engines.while_gating.append(lambda: rig.clock.sleep(3.0))
    assert not rig.parker.wake_parked([], "rejected")
    failed = rig.record(Event.WAKE_FAILED)
    assert failed["reason"] == "re-gate: tool_call: 0/2 cases"
    assert phases(failed) == {"wait_memory": 0.0, "wake_up": 2.0, "checks": 0.0, "gates": 3.0}


def test_a_sleeper_that_died_asleep_is_not_woken(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    sleeper = rig.state.serving
    assert sleeper is not None
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    rig.engine(sleeper).die()
    assert not rig.parker.wake_parked([], "rejected")
    failed = rig.record(Event.WAKE_FAILED)
    assert failed["reason"].startswith("the parked engine is gone: ")
    assert "timeline" not in failed and failed["seconds"] == 0.0  # it got through no phase
    assert ("wake", PORT) not in rig.sleeps.calls


def test_a_wake_re_gates_only_the_gates_that_speak_http(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path)
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    assert rig.parker.wake_parked([], "rejected")
    assert rig.engines.asked == [frozenset({"health", "tool_call", "smoke", "canary"})]
    # the greedy check after the wake, then (no reference was taken: the rig served it by hand) its reference
    assert [c[0] for c in rig.sleeps.calls[-5:]] == ["wake", "is_sleeping", "reset", "greedy", "greedy"]


def test_back_to_the_engine_kept_asleep_swaps_the_two_and_hands_over_the_gpu_locks(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path, keep_parked=True)
    old = rig.state.serving
    assert old is not None
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    new = rig.bringup.spawn(rig.candidate(max_num_seqs=8).at_port(PORT + 1))
    rig.state.promote_trial(last_good=False)
    rig.parker.after_promotion()  # keep_parked: the old one stays asleep, its locks go to the new one
    assert rig.state.parked is old and rig.state.serving is new
    assert rig.parker.back_to_parked(old.candidate)
    assert rig.state.serving is old and rig.state.parked is new  # the new one sleeps in its place
    woken = rig.record(Event.WOKEN)
    assert woken["why"] == "back to the parked launch" and woken["port"] == PORT
    assert list(phases(woken)) == ["wait_memory", "wake_up", "checks", "gates"]
    last_good = rig.store.last_good("svc")
    assert last_good is not None and last_good["fingerprint"] == old.candidate.fingerprint


def test_back_to_parked_is_nothing_when_another_launch_sleeps(tmp_path: Path) -> None:
    rig = parked_rig(tmp_path, keep_parked=True)
    rig.parker.park_for(rig.candidate(max_num_seqs=8))
    rig.serve(rig.candidate(max_num_seqs=8).at_port(PORT + 1))
    assert not rig.parker.back_to_parked(rig.candidate(max_num_seqs=16))
    assert Event.WOKEN not in rig.events()
