"""The stage as a unit (launcher/supervisor/stage.py): stops are recorded with their grace and their
reason, the watch goes before the engine, the proxy is told what serves, and the last-good records
are kept straight — on the rig's fake clock, with scripted engines and watches."""

from __future__ import annotations

from pathlib import Path

from launcher.supervisor.history import Event
from launcher.supervisor.status import Phase
from launcher.watch.verdict import Check, Judgement, Verdict
from tests.engine_double import passes
from tests.supervisor_rig import PORT, Rig


def test_stopping_what_runs_stops_its_watch_first_then_its_engine_with_its_grace(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), supervisor={"stop_grace_s": 7})
    attempt = rig.serve(rig.candidate())
    rig.stage.start_watch()
    watch = rig.watches.made[0]
    rig.stage.stop_running("reload")
    assert watch.stopped and rig.engine(attempt).stops == [7.0]
    assert rig.state.view().running == () and rig.state.watch is None
    stopped = rig.record(Event.ENGINE_STOPPED)
    assert (stopped["why"], stopped["graceful"], stopped["label"]) == (
        "reload",
        True,
        attempt.candidate.label,
    )


def test_a_second_stop_finds_nothing_to_stop(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    attempt = rig.serve(rig.candidate())
    rig.stage.stop_running("first")
    rig.stage.stop_running("second")
    assert rig.engine(attempt).stops == [30.0] and rig.events().count(Event.ENGINE_STOPPED) == 1


def test_the_sleeper_is_dropped_apart_from_what_runs(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), passes())
    sleeper = rig.serve(rig.candidate())
    rig.state.park_serving()
    awake = rig.serve(rig.candidate(max_num_seqs=8))
    rig.stage.drop_parked("the candidate was promoted")
    assert rig.engine(sleeper).stops and not rig.engine(awake).stops
    assert rig.record(Event.ENGINE_STOPPED)["why"] == "parked engine: the candidate was promoted"
    rig.stage.drop_parked("again")  # nothing parked: nothing happens
    assert rig.events().count(Event.ENGINE_STOPPED) == 1


def test_a_promotion_keeps_the_launch_before_it_as_previous_good(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    first, second = rig.candidate(), rig.candidate(max_num_seqs=8)
    rig.stage.record_promotion(first, [])
    assert rig.store.previous_good_to_start("svc") is None  # nothing was promoted before
    rig.stage.record_promotion(second, [{"name": "health", "verdict": "pass"}])
    last, previous = rig.store.last_good("svc"), rig.store.previous_good_to_start("svc")
    assert (
        last is not None
        and last["fingerprint"] == second.fingerprint
        and last["gates"][0]["name"] == "health"
    )
    assert previous is not None and previous["fingerprint"] == first.fingerprint
    assert last["promoted_at"].startswith("2026-")  # stamped by the rig's clock
    rig.stage.record_promotion(second, None)  # the same launch again: previous_good stays the older one
    previous = rig.store.previous_good_to_start("svc")
    assert previous is not None and previous["fingerprint"] == first.fingerprint


def test_a_corrupt_last_good_is_no_previous_good(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.stage.record_promotion(rig.candidate(), [])
    rig.store.last_good_path("svc").write_text("{not json", encoding="utf-8")
    rig.stage.record_promotion(rig.candidate(max_num_seqs=8), [])
    assert rig.store.previous_good_to_start("svc") is None


def test_on_switch_is_run_with_the_port_that_serves_and_a_failure_is_said(tmp_path: Path) -> None:
    seen = tmp_path / "switched.txt"
    hook = ["sh", "-c", f"echo {{port}} {{url}} >> {seen}; exit 3"]
    rig = Rig(tmp_path, supervisor={"on_switch": hook})
    candidate = rig.candidate()
    rig.stage.switched(candidate)
    assert seen.read_text() == f"{PORT} http://127.0.0.1:{PORT}\n"
    switched = rig.record(Event.SWITCHED)
    assert (switched["port"], switched["exit_code"]) == (PORT, 3)
    assert rig.state.view().pointed_at == PORT
    assert "on_switch exited 3" in rig.terminal.getvalue()


def test_without_on_switch_the_record_still_says_where_the_proxy_should_point(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.stage.switched(rig.candidate().at_port(PORT + 1))
    assert rig.state.view().pointed_at == PORT + 1 and Event.SWITCHED not in rig.events()


def test_a_watch_starts_only_for_what_serves_and_only_when_the_profile_asks(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), passes(), supervisor={"watch": False})
    rig.stage.start_watch()
    assert rig.watches.made == []  # nothing serves
    rig.serve(rig.candidate())
    rig.stage.start_watch()
    assert rig.watches.made == []  # watch = false
    assert rig.stage.fresh_watch() == {"watch": None}
    rig.stage.stop_running("next")
    rig.serve(rig.candidate(supervisor={"watch": True}))
    rig.stage.start_watch()
    assert len(rig.watches.made) == 1 and rig.watches.made[0].started
    fresh = rig.stage.fresh_watch()["watch"]
    assert fresh["verdict"] == "serving" and fresh["since"].startswith("2026-")


def test_news_of_a_stopped_watch_is_dropped(tmp_path: Path) -> None:
    wedged = Judgement(Verdict.WEDGED, Check.CANARY, "2 in a row")
    rig = Rig(tmp_path, passes())
    rig.serve(rig.candidate())
    rig.stage.start_watch()
    rig.stage.on_watch_change(wedged)
    assert rig.wake.is_set()
    rig.stage.stop_watch()
    assert rig.stage.take_news() is None
    rig.stage.start_watch()
    rig.stage.on_watch_change(wedged)
    assert rig.stage.take_news() == wedged and rig.stage.take_news() is None


def test_the_watchdog_follows_the_watch_s_verdict(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    assert rig.stage.watch_serves()  # no watch: nothing says otherwise
    rig.serve(rig.candidate())
    rig.stage.start_watch()
    rig.watches.made[0].judgement = Judgement(Verdict.WEDGED, Check.CANARY, "no answer")
    assert not rig.stage.watch_serves()
    rig.watches.made[0].judgement = Judgement(Verdict.DEGRADED, Check.HEALTH, "one 503")
    assert rig.stage.watch_serves()


def test_what_serves_is_recorded_with_a_fresh_watch_verdict(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    candidate = rig.candidate()
    rig.serve(candidate)
    rig.stage.record_serving(
        Event.PROMOTED, phase=Phase.SERVING, status={"detail": "x"}, ready="serving", label=candidate.label
    )
    status = rig.status()
    assert status["phase"] == "serving" and status["watch"]["verdict"] == "serving"
    assert ("ready", "serving") in rig.notices.calls
