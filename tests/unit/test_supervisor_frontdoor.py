"""The supervisor's hand on the front door, as units on the rig (scripted door, engines, sleeps):
where the door is pointed and when it holds, the drain before a park, a stop or a lend and what it
counts, the greedy answer a wake must repeat, and where `launch check`, `bench` and a probe's arm 0
find what serves now (launcher/state/serving.py `reach_url`)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from launcher.state.serving import reach_url, serving_entry
from launcher.supervisor import reload_requests
from launcher.supervisor.history import Event
from launcher.supervisor.reload_requests import Outcome
from launcher.watch.verdict import Check, Judgement, Verdict
from tests.engine_double import Script, passes, rejected_by
from tests.supervisor_rig import PORT, Rig

PARK = {"park": "sleep", "park_port": PORT + 1}
DOOR = {"port": 9000, "drain_timeout_s": 45}


def door_rig(tmp_path: Path, *scripts: Script, **supervisor: object) -> Rig:
    return Rig(tmp_path, *scripts, supervisor={**PARK, **supervisor}, frontdoor=DOOR)


def reload(rig: Rig, **args: Any) -> str:
    rig.candidate(**args)
    rid = reload_requests.request(rig.store.reloads_dir("svc"))
    assert rig.reloader.reload() is None
    return rid


def verdict(rig: Rig, rid: str) -> reload_requests.Verdict:
    found = reload_requests.verdict(rig.store.reloads_dir("svc"), rid)
    assert found is not None
    return found


def test_going_live_points_the_door_at_what_serves_and_records_its_url(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes())
    candidate = rig.candidate()
    rig.serve(candidate)
    rig.stage.go_live(candidate)
    assert rig.door.pointed == [PORT] and rig.state.view().pointed_at == PORT
    switched = rig.record(Event.SWITCHED)
    assert (switched["port"], switched["door"], switched["door_problem"]) == (PORT, rig.door.url, None)
    assert rig.status()["frontdoor_url"] == rig.door.url


def test_a_door_that_cannot_be_pointed_is_said_and_serving_goes_on(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes())
    rig.door.problem = "cannot write target: No space left on device"
    candidate = rig.candidate()
    rig.serve(candidate)
    rig.stage.go_live(candidate)
    assert rig.record(Event.SWITCHED)["door_problem"].endswith("No space left on device")
    assert "front door not pointed" in rig.terminal.getvalue() and rig.state.serving is not None


def test_a_promoted_parked_change_drains_first_then_points_the_door_at_the_other_port(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes(), passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    rid = reload(rig, max_num_seqs=8)
    assert verdict(rig, rid).outcome is Outcome.PROMOTED
    assert rig.door.pointed == [PORT, None, PORT + 1]  # served, held for the change, the new engine
    assert rig.door.drained == [(PORT, 45.0)]  # drained before it slept, with the profile's timeout
    events = rig.events()
    assert events.index(Event.DRAINED) < events.index(Event.PARKED) < events.index(Event.START, 1)
    drained = rig.record(Event.DRAINED)
    assert (drained["left"], drained["timeout_s"]) == (0, 45.0)


def test_requests_still_in_flight_at_the_deadline_are_counted_as_cut(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes(), passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    rig.door.left = 3
    reload(rig, max_num_seqs=8)
    assert rig.record(Event.DRAINED)["left"] == 3
    assert (
        "3 request(s) still in flight after 45 s: cut by the change to candidate" in rig.terminal.getvalue()
    )


def test_a_door_that_cannot_tell_what_is_in_flight_is_said_not_taken_for_empty(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes(), passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    rig.door.left = None
    reload(rig, max_num_seqs=8)
    drained = rig.record(Event.DRAINED)
    assert drained["left"] is None and "did not answer" in drained["problem"]
    assert "in flight unknown" in rig.terminal.getvalue()


def test_a_rejected_parked_change_points_the_door_back_only_once_the_wake_passed_its_checks(
    tmp_path: Path,
) -> None:
    rig = door_rig(tmp_path, passes(), rejected_by("tool_call", "not valid JSON"))
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    door_at: dict[str, int | None] = {}  # each call of the wake, and where the door pointed meanwhile

    def note_the_door(name: str) -> None:
        if name in ("wake", "reset", "greedy"):
            door_at[name] = rig.door.pointed[-1]

    rig.sleeps.on_call = note_the_door
    rid = reload(rig, max_num_seqs=8)
    assert verdict(rig, rid).outcome is Outcome.ROLLED_BACK
    assert door_at == {"wake": None, "reset": None, "greedy": None}  # held through the wake and its checks
    assert rig.door.pointed == [PORT, None, PORT]  # then back to the woken engine


def test_a_woken_engine_that_answers_otherwise_is_a_failed_wake(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes(), rejected_by("tool_call", "not valid JSON"), passes())
    served = rig.serve(rig.candidate())
    rig.stage.go_live(served.candidate)
    assert served.greedy is not None and rig.record(Event.GREEDY_REFERENCE)["text"] == served.greedy

    def garbage_after_the_wake(name: str) -> None:
        if name == "wake":
            rig.sleeps.greedy_text[PORT] = " zq zq zq"

    rig.sleeps.on_call = garbage_after_the_wake
    rid = reload(rig, max_num_seqs=8)
    failed = rig.record(Event.WAKE_FAILED)
    assert failed["reason"] == (
        f"it answers the greedy prompt otherwise after the wake: {served.greedy!r} then ' zq zq zq'"
    )
    assert Event.ROLLBACK in rig.events() and verdict(rig, rid).outcome is Outcome.ROLLED_BACK
    assert rig.engine(served).stops  # the sleeper went; last-good started cold


def test_a_greedy_check_that_gets_no_answer_is_a_failed_wake_too(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes(), rejected_by("health", "503"), passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    rig.sleeps.on_call = lambda name: (
        rig.sleeps.fail.update(greedy="answered 500") if name == "wake" else None
    )
    reload(rig, max_num_seqs=8)
    assert rig.record(Event.WAKE_FAILED)["reason"] == "the greedy check: answered 500"


def test_an_engine_that_serves_again_keeps_its_first_answer_as_the_reference(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes())
    served = rig.serve(rig.candidate())
    rig.stage.go_live(served.candidate)
    first = served.greedy
    rig.sleeps.greedy_text[PORT] = " something else"
    rig.stage.go_live(served.candidate)  # woken and live again: no new reference
    assert served.greedy == first and rig.events().count(Event.GREEDY_REFERENCE) == 1


def test_a_profile_that_does_not_park_takes_no_reference(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), frontdoor=DOOR)
    served = rig.serve(rig.candidate())
    rig.stage.go_live(served.candidate)
    assert served.greedy is None and rig.sleeps.calls == [] and rig.door.pointed == [PORT]


def test_a_wedge_holds_the_door_before_the_restart_and_points_it_at_the_restarted_engine(
    tmp_path: Path,
) -> None:
    rig = door_rig(tmp_path, passes(), passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    rig.stage.start_watch()
    rig.recovery.handle(Judgement(Verdict.WEDGED, Check.CANARY, "2 canaries in a row"))
    assert rig.door.pointed == [PORT, None, PORT]
    assert rig.door.drained == []  # its requests hang: nothing to wait for
    held = [r for r in rig.history.read() if r["event"] == Event.SWITCHED and r["port"] is None]
    assert held and held[0]["why"] == "wedged: restart"


def test_a_lend_drains_the_engine_before_it_sleeps_for_the_probe(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    assert rig.lending.lend(4242).outcome is Outcome.PARKED
    assert rig.door.pointed == [PORT, None] and rig.door.drained == [(PORT, 45.0)]
    rig.lending.take_back("asked by pid 4242")
    assert rig.door.pointed[-1] == PORT


def test_without_a_front_door_nothing_is_held_or_drained(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), passes(), supervisor=PARK)
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    reload(rig, max_num_seqs=8)
    assert Event.DRAINED not in rig.events() and rig.door.pointed == []


def test_a_stop_signal_holds_the_door_for_the_next_start(tmp_path: Path) -> None:
    rig = door_rig(tmp_path, passes())
    rig.stage.go_live(rig.serve(rig.candidate()).candidate)
    from launcher.supervisor.service import Supervisor

    supervisor = Supervisor.__new__(Supervisor)  # only the serve loop's signal handling, over the rig
    supervisor.ctx, supervisor.stage, supervisor.inbox = rig.ctx, rig.stage, rig.inbox
    rig.inbox._pending.append(signal.SIGTERM)
    assert supervisor._take_signals() == 0
    assert rig.door.pointed == [PORT, None] and rig.state.serving is None


# ---- where clients reach what serves ---------------------------------------------------------
def entry(status: dict[str, Any] | None, last_good: dict[str, Any] | None) -> dict[str, Any]:
    return serving_entry("svc", status, last_good, profile_known=True)


def test_a_profile_with_a_front_door_is_reached_through_it_whatever_serves() -> None:
    profile = {"engine": {"port": 8000}, "frontdoor": {"port": 9000, "host": "0.0.0.0"}}
    assert reach_url(profile, entry(None, None)) == "http://127.0.0.1:9000"


def test_without_a_door_the_engine_that_serves_is_reached_on_its_port_not_engine_port() -> None:
    profile = {"engine": {"port": 8000}, "supervisor": {"park": "sleep", "park_port": 8001}}
    status = {"phase": "serving", "serving_fingerprint": "fp"}
    last_good = {"fingerprint": "fp", "host": "127.0.0.1", "port": 8001}
    assert reach_url(profile, entry(status, last_good)) == "http://127.0.0.1:8001"
    assert reach_url(profile, entry(None, None)) == "http://127.0.0.1:8000"  # nothing serves: engine.port
    stopped = {"phase": "stopped", "serving_fingerprint": "fp"}
    assert reach_url(profile, entry(stopped, last_good)) == "http://127.0.0.1:8000"


def test_status_tells_the_door_s_url_and_the_engine_s_apart() -> None:
    status = {"phase": "serving", "serving_fingerprint": "fp", "frontdoor_url": "http://127.0.0.1:9000"}
    shown = entry(status, {"fingerprint": "fp", "host": "0.0.0.0", "port": 8001})
    assert (shown["url"], shown["engine_url"]) == ("http://127.0.0.1:9000", "http://127.0.0.1:8001")
    down = entry({**status, "phase": "failed"}, None)
    assert (down["url"], down["engine_url"]) == (None, None)  # nothing serves: no address at all


def test_a_corrupt_status_or_last_good_leaves_check_on_the_profile_s_address(tmp_path: Path) -> None:
    from launcher.state.serving import reach_now
    from launcher.state.store import StateStore

    store = StateStore(tmp_path / "state")
    store.status_path("svc").parent.mkdir(parents=True)
    store.status_path("svc").write_text("{not json")
    profile = {"engine": {"port": 8000}}
    assert reach_now(store, "svc", profile) == "http://127.0.0.1:8000"
    store.status_path("svc").write_text('{"phase": "serving", "serving_fingerprint": "fp"}')
    store.last_good_path("svc").write_text("[1, 2")  # unreadable: no engine URL, not a crash
    assert reach_now(store, "svc", profile) == "http://127.0.0.1:8000"
