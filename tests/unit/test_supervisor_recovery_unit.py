"""Recovery, reload and lending as units on the rig's fake clock: the window in which a launch judged
bad again is rolled back, the downtime a reload reports, a lend refused or taken back, and bring-up's
records — each decision by itself, without the serve loop."""

from __future__ import annotations

from pathlib import Path

from launcher.supervisor import reload_requests
from launcher.supervisor.history import Event
from launcher.supervisor.recovery import MEMORY_WINDOW_S
from launcher.supervisor.reload_requests import Outcome
from launcher.supervisor.status import Phase
from launcher.watch.verdict import Check, Judgement, Verdict
from tests.engine_double import passes, rejected_by
from tests.supervisor_rig import PORT, Rig

WEDGED = Judgement(Verdict.WEDGED, Check.CANARY, "2 canaries in a row got no answer")
PARK = {"park": "sleep", "park_port": PORT + 1}


def unguarded(rig: Rig) -> Rig:
    rig.hooks.restart_guard = None  # the recovery's own window, on the fake clock
    return rig


def test_judged_bad_again_within_the_window_rolls_back_and_after_it_restarts(tmp_path: Path) -> None:
    rig = unguarded(Rig(tmp_path))
    candidate = rig.candidate()
    assert not rig.recovery._judged_bad_again(candidate, "wedged")  # the first time
    rig.clock.sleep(MEMORY_WINDOW_S - 1)
    assert rig.recovery._judged_bad_again(candidate, "wedged")  # again within the window
    rig.clock.sleep(MEMORY_WINDOW_S + 1)
    assert not rig.recovery._judged_bad_again(candidate, "wedged")  # the earlier ones aged out


def test_a_wedge_restarts_the_same_launch_and_it_serves_again(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), passes())
    first = rig.serve(rig.candidate())
    rig.stage.start_watch()
    assert rig.recovery.handle(WEDGED) is None
    assert rig.engine(first).stops and rig.state.serving is not first and rig.state.serving is not None
    assert [e for e in rig.events() if e in ("wedged", "recovered")] == ["wedged", "recovered"]
    wedged = rig.record(Event.WEDGED)
    assert (wedged["action"], wedged["again_within_window"]) == ("restart", False)
    assert rig.status()["phase"] == Phase.SERVING


def test_a_second_wedge_of_the_same_launch_goes_back_to_the_launch_before_it(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), passes(), passes())
    before = rig.candidate()
    rig.stage.record_promotion(before, [])
    now = rig.candidate(max_num_seqs=8)
    rig.serve(now)
    rig.guard.record_failure(now.fingerprint, "watch: wedged earlier")
    rig.stage.start_watch()
    assert rig.recovery.handle(WEDGED) is None
    wedged = rig.record(Event.WEDGED)
    assert (wedged["action"], wedged["again_within_window"]) == ("rollback", True)
    assert rig.record(Event.ROLLBACK)["to"] == f"last-good svc@{before.fingerprint}"
    assert rig.state.on_last_good and rig.status()["phase"] == Phase.SERVING_LAST_GOOD


def test_degraded_news_is_recorded_and_nothing_is_stopped(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    serving = rig.serve(rig.candidate())
    rig.stage.start_watch()
    degraded = Judgement(Verdict.DEGRADED, Check.HEALTH, "/health answered 503")
    assert rig.recovery.handle(degraded) is None
    assert not rig.engine(serving).stops and rig.record(Event.WATCH)["verdict"] == "degraded"
    assert rig.status()["watch"]["since"].startswith("2026-")


def test_on_wedge_log_keeps_the_engine_and_records_the_evidence(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), supervisor={"on_wedge": "log"})
    serving = rig.serve(rig.candidate())
    rig.stage.start_watch()
    assert rig.recovery.handle(WEDGED) is None
    assert not rig.engine(serving).stops and rig.watches.made[0].evidence == [("wedged", "log")]
    assert rig.record(Event.WEDGED)["incident"].endswith("-wedged.txt")


def test_news_with_nothing_serving_is_no_news(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    assert rig.recovery.handle(WEDGED) is None and rig.events() == []


def test_a_reload_reports_the_downtime_the_clock_saw(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), passes())
    rig.serve(rig.candidate())
    rig.candidate(max_num_seqs=8)  # the file changed
    rig.engines.while_gating.append(lambda: rig.clock.sleep(42.0))  # the candidate's start and gates
    ids = [reload_requests.request(rig.store.reloads_dir("svc"))]
    assert rig.reloader.reload() is None
    verdict = reload_requests.verdict(rig.store.reloads_dir("svc"), ids[0])
    assert verdict is not None and verdict.outcome is Outcome.PROMOTED and verdict.down_s == 42.0
    assert "engine down 42.0 s" in rig.terminal.getvalue()


def test_a_reload_that_changes_nothing_puts_the_profile_s_launch_back_after_last_good(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    serving = rig.serve(rig.candidate())
    rig.state.serve(serving, last_good=True)  # a rollback left it serving as last-good
    verdict, code = rig.reloader._reload_once()
    assert (verdict.outcome, code) == (Outcome.UNCHANGED, None)
    assert not rig.state.on_last_good and rig.status()["phase"] == Phase.SERVING


def test_a_lend_is_refused_when_the_profile_does_not_park(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes())
    rig.serve(rig.candidate())
    verdict = rig.lending.lend(4242)
    assert verdict.outcome is Outcome.REFUSED and "does not park" in verdict.detail
    assert rig.state.lent_to is None and rig.sleeps.calls == []


def test_a_lend_sleeps_what_serves_gives_up_its_locks_and_says_where_the_arms_run(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), supervisor=PARK)
    serving = rig.serve(rig.candidate())
    verdict = rig.lending.lend(4242)
    assert verdict.outcome is Outcome.PARKED and verdict.data["port"] == PORT + 1
    assert rig.state.lent_to == 4242 and rig.status()["phase"] == Phase.PARKED
    assert rig.gpu_locks.log[-1] == f"release {serving.candidate.label}"
    assert rig.lending.lend(4242).outcome is Outcome.PARKED  # asked again: the same answer


def test_taking_back_waits_while_an_arm_holds_the_gpus_then_wakes(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), supervisor=PARK)
    serving = rig.serve(rig.candidate())
    rig.lending.lend(4242)
    rig.gpu_locks.held_by_other.add(serving.candidate.label)
    verdict, code = rig.lending.take_back("asked by pid 4242")
    assert (verdict.outcome, code) == (Outcome.FAILED, None) and verdict.detail.startswith("still parked")
    assert rig.state.lent_to == 4242
    rig.gpu_locks.held_by_other.clear()
    rig.sleeps.on_call = lambda name: rig.clock.sleep(0.5 if name == "wake" else 0.0)
    verdict, code = rig.lending.take_back("asked by pid 4242")
    assert (verdict.outcome, code, verdict.data["seconds"]) == (Outcome.WOKEN, None, 0.5)
    assert rig.state.lent_to is None and rig.status()["phase"] == Phase.SERVING
    woken = rig.record(Event.WOKEN)  # where the half second went, as a park's wake keeps it
    timeline = [(p["name"], p["seconds"]) for p in woken["timeline"]["phases"]]
    assert timeline == [("wait_memory", 0.0), ("wake_up", 0.5), ("checks", 0.0), ("gates", 0.0)]
    assert woken["timeline"]["kind"] == "wake" and woken["seconds"] == 0.5


def test_a_lender_that_is_gone_wakes_the_engine(tmp_path: Path) -> None:
    rig = Rig(tmp_path, passes(), supervisor=PARK)
    rig.serve(rig.candidate())
    rig.lending.lend(2**22 + 12_345)  # above any pid_max: no such process
    assert rig.lending.lender_gone() is None
    assert rig.state.lent_to is None and rig.record(Event.WOKEN)["why"].endswith("is gone")


def test_bring_up_remembers_a_rejection_and_forgets_it_once_promoted(tmp_path: Path) -> None:
    rig = Rig(tmp_path, rejected_by("health", "503"))
    candidate = rig.candidate()
    rig.bringup.remember_rejection(candidate, "rejected by health: 503")
    entry = rig.store.rejected("svc")[candidate.fingerprint]
    assert entry["reason"] == "rejected by health: 503" and entry["at"].startswith("2026-")
    rig.bringup.remember_rejection(candidate, None)
    assert candidate.fingerprint not in rig.store.rejected("svc")


def test_a_launch_rejected_before_is_not_retried_while_last_good_differs(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    good, bad = rig.candidate(), rig.candidate(max_num_seqs=8)
    rig.bringup.remember_rejection(bad, "rejected by health: 503")
    assert rig.bringup.rejected_before(bad) is None  # no last-good: nothing else to serve, so it is tried
    rig.stage.record_promotion(good, [])
    why = rig.bringup.rejected_before(bad)
    assert why is not None and "was rejected before" in why and "--retry-rejected" in why
    rig.store.rejected_path("svc").write_text("[not a record", encoding="utf-8")
    why = rig.bringup.rejected_before(bad)  # unreadable: it may have named this launch, so not retried
    assert why is not None and "is not known to have passed" in why and "--retry-rejected" in why
    assert [p.read_text() for p in rig.store.set_aside_files("svc")] == ["[not a record"]
    assert rig.bringup.rejected_before(good) is None  # last-good itself is never held back
