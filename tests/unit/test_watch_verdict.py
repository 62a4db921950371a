"""The serving watch's rules, fed observations at chosen times (the times are the fake clock)."""

from __future__ import annotations

from launcher.watch.verdict import Check, Judge, Judgement, Kind, Observation, Rules, Verdict


def obs(
    check: Check, kind: Kind, at: float, detail: str = "", waited_s: float = 0.0, **figures: object
) -> Observation:
    return Observation(check, kind, at, detail or f"{check} {kind}", dict(figures), waited_s=waited_s)


def timeout(at: float, check: Check = Check.CANARY) -> Observation:
    return obs(check, Kind.TIMEOUT, at, f"{check}: no answer within 10 s", waited_s=10.0)


def judged(*observations: Observation, rules: Rules | None = None) -> Judge:
    judge = Judge(rules or Rules())
    for one in observations:
        judge.observe(one)
    return judge


def test_a_stopped_engine_core_is_degraded_then_wedged_after_two_missed_canaries_and_named() -> None:
    stopped = obs(Check.PROCESS, Kind.BAD_PROCESS, 1.0, "VLLM::EngineCore pid 42 is stopped (state T)")
    judge = judged(obs(Check.CANARY, Kind.OK, 0.0), stopped)
    assert judge.judgement().verdict is Verdict.DEGRADED
    assert judge.judgement().check is Check.PROCESS
    judge.observe(timeout(11.0))
    assert judge.judgement().verdict is Verdict.DEGRADED  # one miss: retried
    judge.observe(timeout(22.0))
    verdict = judge.judgement()
    assert verdict.verdict is Verdict.WEDGED and verdict.check is Check.CANARY
    assert verdict.process == "VLLM::EngineCore pid 42 is stopped (state T)"
    assert "2 in a row" in verdict.detail and verdict.figures["misses"] == 2


def test_wedge_after_is_the_number_of_misses_in_a_row() -> None:
    judge = judged(timeout(10.0), timeout(21.0), rules=Rules(wedge_after=3))
    assert judge.judgement().verdict is Verdict.DEGRADED
    judge.observe(timeout(32.0))
    assert judge.judgement().verdict is Verdict.WEDGED


def test_an_answer_breaks_the_run_of_misses() -> None:
    judge = judged(timeout(10.0), obs(Check.CANARY, Kind.OK, 12.0), timeout(23.0))
    assert judge.judgement().verdict is Verdict.DEGRADED


def test_health_200_clears_no_canary_miss_since_it_answers_while_the_engine_is_stopped() -> None:
    judge = judged(timeout(10.0), obs(Check.HEALTH, Kind.OK, 12.0), timeout(21.0))
    assert judge.judgement().verdict is Verdict.WEDGED


def test_health_timeouts_in_a_row_wedge_on_their_own() -> None:
    judge = judged(timeout(10.0, Check.HEALTH), timeout(15.0, Check.HEALTH))
    assert judge.judgement().verdict is Verdict.WEDGED
    assert judge.judgement().check is Check.HEALTH


def test_a_canary_that_waited_while_tokens_flowed_was_queued_not_hung() -> None:
    moving = [
        obs(Check.METRICS, Kind.PROGRESS, t, moved_since=t - 1, running=256) for t in (3.0, 8.0, 13.0, 18.0)
    ]
    judge = judged(moving[0], moving[1], timeout(11.0), moving[2], moving[3], timeout(22.0))
    assert judge.judgement().verdict is Verdict.SERVING


def test_tokens_that_moved_before_the_canary_was_sent_excuse_nothing() -> None:
    judge = judged(obs(Check.METRICS, Kind.PROGRESS, 0.5, moved_since=0.0), timeout(11.0), timeout(22.0))
    assert judge.judgement().verdict is Verdict.WEDGED  # sent at 1.0 and 12.0: nothing moved since


def test_a_stalled_engine_is_wedged_at_once_with_its_figures() -> None:
    stall = obs(Check.METRICS, Kind.STALLED, 10.0, "1 requests running ... moved for 3.0 s", frozen_s=3.0)
    verdict = judged(obs(Check.CANARY, Kind.OK, 9.0), stall).judgement()
    assert (verdict.verdict, verdict.check) == (Verdict.WEDGED, Check.METRICS)
    assert verdict.detail == "1 requests running ... moved for 3.0 s" and verdict.figures == {"frozen_s": 3.0}


def test_a_process_stopped_for_stall_s_is_wedged_and_one_seen_running_again_clears_it() -> None:
    halted = obs(Check.PROCESS, Kind.HALTED, 4.0, "VLLM::Worker_TP1 pid 7 stopped (state T) for 3.0 s")
    judge = judged(obs(Check.PROCESS, Kind.BAD_PROCESS, 1.0, "VLLM::Worker_TP1 pid 7 is stopped"), halted)
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check) == (Verdict.WEDGED, Check.PROCESS)
    assert verdict.process == "VLLM::Worker_TP1 pid 7 stopped (state T) for 3.0 s"
    judge.observe(obs(Check.PROCESS, Kind.OK, 5.0))
    assert judge.judgement().verdict is Verdict.SERVING


def test_two_error_answers_in_a_row_are_failing_and_health_200_does_not_hide_them() -> None:
    error = obs(Check.CANARY, Kind.ERROR, 1.0, "canary: HTTP 500: Internal Server Error", status=500)
    judge = judged(error, obs(Check.HEALTH, Kind.OK, 2.0))
    assert judge.judgement().verdict is Verdict.DEGRADED
    judge.observe(obs(Check.CANARY, Kind.ERROR, 3.0, "canary: HTTP 500", status=500))
    verdict = judge.judgement()
    assert verdict.verdict is Verdict.FAILING and verdict.check is Check.CANARY
    judge.observe(obs(Check.CANARY, Kind.OK, 20.0))
    assert judge.judgement().verdict is Verdict.SERVING


def test_a_wrong_tool_call_counts_as_an_error_answer() -> None:
    wrong = obs(Check.TOOL_CALL, Kind.ERROR, 1.0, "tool-call canary (auto): no tool call")
    assert judged(wrong, wrong).judgement().verdict is Verdict.FAILING


def test_real_traffic_mostly_5xx_in_two_windows_is_failing() -> None:
    window = obs(Check.TRAFFIC, Kind.MOSTLY_5XX, 5.0, "40 of 50 requests answered 5xx")
    judge = judged(window)
    assert judge.judgement().verdict is Verdict.DEGRADED
    judge.observe(window)
    assert judge.judgement().verdict is Verdict.FAILING
    judge.observe(obs(Check.TRAFFIC, Kind.OK, 15.0))
    assert judge.judgement().verdict is Verdict.SERVING


def test_low_host_memory_twice_is_starving_once_is_degraded() -> None:
    low = obs(Check.HOST_MEMORY, Kind.LOW_MEMORY, 5.0, "host RAM: 0.50 GiB available < 2 GiB required")
    assert judged(low).judgement().verdict is Verdict.DEGRADED
    assert judged(low, low).judgement().verdict is Verdict.STARVING
    assert judged(low, obs(Check.HOST_MEMORY, Kind.OK, 10.0), low).judgement().verdict is Verdict.DEGRADED


def test_a_leak_is_starving_and_stays_so() -> None:
    leak = obs(Check.LEAK, Kind.LEAK, 100.0, "resident memory grew 3+ windows in a row")
    judge = judged(leak, obs(Check.LEAK, Kind.OK, 120.0))
    assert judge.judgement().verdict is Verdict.STARVING


def test_the_worst_standing_verdict_wins() -> None:
    low = obs(Check.HOST_MEMORY, Kind.LOW_MEMORY, 5.0)
    judge = judged(low, low, timeout(10.0), timeout(21.0))
    assert judge.judgement().verdict is Verdict.WEDGED
    assert not Verdict.WEDGED.serves and not Verdict.FAILING.serves and Verdict.STARVING.serves
    assert {v for v in Verdict if v.is_final} == {Verdict.WEDGED, Verdict.FAILING, Verdict.STARVING}


def test_a_serving_server_is_serving() -> None:
    judge = judged(
        obs(Check.CANARY, Kind.OK, 1.0), obs(Check.HEALTH, Kind.OK, 2.0), obs(Check.PROCESS, Kind.OK, 3.0)
    )
    assert judge.judgement().verdict is Verdict.SERVING
    assert judge.judgement().to_json()["verdict"] == "serving"


# ---- long series: what each observation does to the run it belongs to -----------------------------
def ok(at: float, check: Check = Check.CANARY) -> Observation:
    return obs(check, Kind.OK, at)


def error(at: float, check: Check = Check.CANARY, detail: str = "canary: HTTP 500") -> Observation:
    return obs(check, Kind.ERROR, at, detail)


def moved(at: float) -> Observation:
    """A reading whose figures moved since the reading at `at` (made a second later)."""
    return obs(Check.METRICS, Kind.PROGRESS, at + 1.0, "engine stepping", moved_since=at, running=8)


def verdicts_of(judge: Judge, observations: list[Observation]) -> list[Verdict]:
    """The verdict after each observation, in order."""
    found = []
    for one in observations:
        judge.observe(one)
        found.append(judge.judgement().verdict)
    return found


def test_misses_interleaved_with_answers_are_each_retried_and_never_wedge() -> None:
    series = [one for t in range(0, 200, 20) for one in (timeout(t + 11.0), ok(t + 13.0))]
    seen = verdicts_of(Judge(Rules()), series)
    assert seen == [Verdict.DEGRADED, Verdict.SERVING] * 10


def test_misses_are_counted_per_family_so_one_of_each_is_no_run() -> None:
    judge = judged(timeout(11.0), timeout(12.0, Check.HEALTH))
    assert judge.judgement().verdict is Verdict.DEGRADED  # two misses, but one in each family
    judge.observe(timeout(17.0, Check.HEALTH))
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check, verdict.figures["misses"]) == (Verdict.WEDGED, Check.HEALTH, 2)
    assert verdict.detail == "health: no answer within 10 s (2 in a row)"


def test_the_longest_run_of_any_family_is_the_one_named() -> None:
    judge = judged(
        timeout(5.0, Check.HEALTH), timeout(11.0), timeout(15.0, Check.HEALTH), timeout(22.0), timeout(33.0)
    )
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check, verdict.figures["misses"]) == (Verdict.WEDGED, Check.CANARY, 3)


def test_a_tool_call_miss_counts_in_the_canarys_family_but_its_errors_are_a_series_of_their_own() -> None:
    wedged = judged(timeout(11.0), timeout(22.0, Check.TOOL_CALL)).judgement()
    assert (wedged.verdict, wedged.check) == (Verdict.WEDGED, Check.TOOL_CALL)
    assert wedged.detail == "tool_call: no answer within 10 s (2 in a row)"
    answered = judged(timeout(11.0), ok(13.0, Check.TOOL_CALL), timeout(24.0)).judgement()
    assert answered.verdict is Verdict.DEGRADED  # the tool call answered: the run of misses broke
    mixed = judged(error(1.0, Check.TOOL_CALL), error(2.0)).judgement()
    assert mixed.verdict is Verdict.DEGRADED  # one wrong tool call and one plain error: no series of two


def test_two_wrong_tool_calls_in_a_row_are_failing_whatever_the_plain_canaries_between_said() -> None:
    wrong = "tool-call canary (auto): no tool call"
    judge = judged(error(45.0, Check.TOOL_CALL, wrong), ok(46.0), ok(55.0))
    assert (judge.judgement().verdict, judge.judgement().check) == (Verdict.DEGRADED, Check.TOOL_CALL)
    judge.observe(error(65.0, Check.TOOL_CALL, wrong))
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check) == (Verdict.FAILING, Check.TOOL_CALL)
    assert verdict.detail == f"{wrong} (2 in a row)"
    judge.observe(ok(76.0, Check.TOOL_CALL))
    assert judge.judgement().verdict is Verdict.SERVING


def test_a_tool_call_the_server_is_not_configured_for_is_no_health_signal() -> None:
    unconfigured = obs(Check.TOOL_CALL, Kind.UNCONFIGURED, 20.0, "the server does not do tool calls")
    assert judged(unconfigured, unconfigured).judgement().verdict is Verdict.SERVING
    after_a_wrong_one = judged(error(1.0, Check.TOOL_CALL), unconfigured, unconfigured).judgement()
    assert after_a_wrong_one.verdict is Verdict.SERVING  # no series of two: the answer is the profile's
    assert judged(timeout(11.0), unconfigured, timeout(24.0)).judgement().verdict is Verdict.DEGRADED


def test_a_health_answer_breaks_only_the_health_run_and_health_errors_never_make_failing() -> None:
    health_503 = obs(Check.HEALTH, Kind.ERROR, 6.0, "/health answered 503")
    judge = judged(timeout(5.0, Check.HEALTH), health_503, timeout(16.0, Check.HEALTH))
    assert judge.judgement().verdict is Verdict.DEGRADED  # the 503 was an answer: one miss since
    for at in (20.0, 25.0, 30.0, 35.0):
        judge.observe(obs(Check.HEALTH, Kind.ERROR, at, "/health answered 503"))
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check) == (
        Verdict.DEGRADED,
        Check.HEALTH,
    )  # the group watch names a death
    assert judged(timeout(11.0), health_503, timeout(22.0)).judgement().verdict is Verdict.WEDGED


def test_an_error_answer_between_two_misses_breaks_the_run() -> None:
    judge = judged(timeout(11.0), error(12.0), timeout(23.0))
    assert judge.judgement().verdict is Verdict.DEGRADED


def test_misses_alternating_with_error_answers_end_failing_not_degraded_forever() -> None:
    seen = verdicts_of(Judge(Rules()), [timeout(11.0), error(12.0), timeout(23.0), error(24.0)])
    assert seen == [Verdict.DEGRADED, Verdict.DEGRADED, Verdict.DEGRADED, Verdict.FAILING]


def test_an_answer_that_is_fine_ends_the_run_of_errors() -> None:
    assert judged(error(1.0), ok(2.0), error(3.0)).judgement().verdict is Verdict.DEGRADED
    three = Rules(errors_after=3)
    assert judged(error(1.0), error(2.0), rules=three).judgement().verdict is Verdict.DEGRADED
    failing = judged(error(1.0), error(2.0), error(3.0, detail="canary: HTTP 502"), rules=three).judgement()
    assert failing.detail == "canary: HTTP 502 (3 in a row)" and failing.figures["errors"] == 3


def test_a_canary_is_excused_while_the_engine_works_and_its_figures_moved_within_the_stall_rules_eye() -> (
    None
):
    sent_at_1 = timeout(11.0)  # waited 10 s: sent at 1.0
    assert Judge(Rules()).busy(sent_at_1) is False  # no progress ever seen
    at_send = judged(moved(0.0))  # a reading at 1.0 saw the figures move
    assert at_send.busy(sent_at_1)
    at_send.observe(sent_at_1)
    assert at_send.judgement().verdict is Verdict.SERVING  # queued: not even degraded
    just_before = judged(moved(-0.001))
    assert not just_before.busy(sent_at_1)
    just_before.observe(sent_at_1)
    assert just_before.judgement().verdict is Verdict.DEGRADED
    patient = obs(
        Check.METRICS, Kind.PROGRESS, -2.0, "engine stepping", moved_since=-3.0, running=1, allowed_s=3.0
    )
    assert judged(patient).busy(sent_at_1)  # moved 3 s before it was sent: the stall rule watches since


def test_an_idle_engine_excuses_no_miss_though_its_figures_just_moved() -> None:
    """The watch's own last canary moved the counters; it was gone by the reading (nothing running)."""
    own = obs(Check.METRICS, Kind.PROGRESS, 9.0, "engine stepping", moved_since=7.0, running=0, waiting=0)
    assert not judged(own).busy(timeout(11.0))


def test_an_engine_mid_step_is_no_progress_that_excuses_a_canary() -> None:
    waiting = obs(Check.METRICS, Kind.PROGRESS, 15.0, "engine mid-step", running=8)
    judge = judged(waiting, timeout(22.0), timeout(33.0))
    assert judge.judgement().verdict is Verdict.WEDGED


def test_a_queued_canary_neither_counts_as_a_miss_nor_breaks_the_run() -> None:
    judge = judged(timeout(11.0), moved(15.0), timeout(22.0))  # the second waited behind moving tokens
    assert judge.judgement().verdict is Verdict.DEGRADED  # the first miss still stands
    judge.observe(timeout(33.0))  # sent at 23: nothing moved since 15
    verdict = judge.judgement()
    assert verdict.verdict is Verdict.WEDGED and verdict.figures["misses"] == 2


def test_figures_that_moved_before_the_engine_stalled_excuse_no_miss() -> None:
    stall = obs(Check.METRICS, Kind.STALLED, 18.0, "8 requests running, nothing moved for 3.0 s")
    judge = judged(moved(15.0), stall)
    assert not judge.busy(timeout(22.0))  # sent at 12, figures moved after 15, then froze: no excuse
    assert judge.judgement().verdict is Verdict.WEDGED


def test_a_stall_that_ended_needs_wedge_after_misses_again() -> None:
    stall = obs(Check.METRICS, Kind.STALLED, 10.0, "frozen")
    waiting = obs(Check.METRICS, Kind.PROGRESS, 15.0, "engine mid-step")
    judge = judged(stall, waiting, timeout(21.0))
    assert judge.judgement().verdict is Verdict.DEGRADED
    judge.observe(timeout(32.0))
    assert judge.judgement().verdict is Verdict.WEDGED and judge.judgement().check is Check.CANARY


def test_an_unreadable_metrics_page_neither_starts_nor_ends_a_stall() -> None:
    unreadable = obs(Check.METRICS, Kind.UNREADABLE, 12.0, "/metrics: no answer")
    alone = judged(unreadable, timeout(21.0)).judgement()
    assert (alone.verdict, alone.check) == (Verdict.DEGRADED, Check.METRICS)  # no stall began
    stall = obs(Check.METRICS, Kind.STALLED, 10.0, "frozen")
    ended = judged(stall, unreadable).judgement()
    assert (ended.verdict, ended.check) == (Verdict.WEDGED, Check.METRICS)  # nor ended


# ---- several verdicts at once: the worst one wins, and each clears on its own -----------------------
def low_memory(at: float) -> Observation:
    return obs(Check.HOST_MEMORY, Kind.LOW_MEMORY, at, f"host RAM low at {at:g}")


def mostly_5xx(at: float) -> Observation:
    return obs(Check.TRAFFIC, Kind.MOSTLY_5XX, at, f"30 of 40 requests answered 5xx at {at:g}")


def test_failing_outranks_starving_and_starving_shows_once_the_errors_clear() -> None:
    judge = judged(low_memory(5.0), low_memory(10.0), error(11.0), error(12.0))
    assert judge.judgement().verdict is Verdict.FAILING
    judge.observe(ok(27.0))
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check, verdict.detail) == (
        Verdict.STARVING,
        Check.HOST_MEMORY,
        "host RAM low at 10",
    )
    judge.observe(obs(Check.HOST_MEMORY, Kind.OK, 15.0))
    assert judge.judgement().verdict is Verdict.SERVING


def test_wedged_by_health_outranks_failing_canaries() -> None:
    judge = judged(error(1.0), error(2.0), timeout(5.0, Check.HEALTH), timeout(15.0, Check.HEALTH))
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check) == (Verdict.WEDGED, Check.HEALTH)
    judge.observe(ok(20.0, Check.HEALTH))
    assert judge.judgement().verdict is Verdict.FAILING


def test_the_leak_latch_outlasts_what_outranked_it_and_keeps_the_first_leak() -> None:
    first = obs(Check.LEAK, Kind.LEAK, 100.0, "GPU memory (NVML) grew to +1500 MiB")
    later = obs(Check.LEAK, Kind.LEAK, 120.0, "GPU memory (NVML) grew to +2000 MiB")
    judge = judged(first, error(101.0), error(102.0))
    assert judge.judgement().verdict is Verdict.FAILING
    for one in (ok(117.0), later, obs(Check.LEAK, Kind.OK, 140.0, "flat")):
        judge.observe(one)
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check, verdict.detail) == (Verdict.STARVING, Check.LEAK, first.detail)


def test_starving_host_memory_is_named_before_a_latched_leak() -> None:
    leak = obs(Check.LEAK, Kind.LEAK, 100.0, "resident memory grew")
    verdict = judged(leak, low_memory(101.0), low_memory(106.0)).judgement()
    assert (verdict.verdict, verdict.check) == (Verdict.STARVING, Check.HOST_MEMORY)


def test_streaks_are_kept_per_check_so_one_does_not_break_anothers() -> None:
    verdict = judged(mostly_5xx(5.0), low_memory(6.0), mostly_5xx(10.0)).judgement()
    assert (verdict.verdict, verdict.check, verdict.detail) == (
        Verdict.FAILING,
        Check.TRAFFIC,
        "30 of 40 requests answered 5xx at 10",
    )
    assert judged(
        low_memory(5.0), obs(Check.TRAFFIC, Kind.OK, 6.0), low_memory(10.0)
    ).judgement().verdict is (Verdict.STARVING)


def test_windows_after_sets_how_many_samples_in_a_row_make_starving_and_failing() -> None:
    three = Rules(windows_after=3)
    assert judged(low_memory(5.0), low_memory(10.0), rules=three).judgement().verdict is Verdict.DEGRADED
    assert judged(low_memory(5.0), low_memory(10.0), low_memory(15.0), rules=three).judgement().verdict is (
        Verdict.STARVING
    )
    assert judged(mostly_5xx(5.0), mostly_5xx(10.0), rules=three).judgement().verdict is Verdict.DEGRADED
    seen = verdicts_of(Judge(three), [mostly_5xx(5.0), mostly_5xx(10.0), obs(Check.TRAFFIC, Kind.OK, 15.0)])
    assert seen == [Verdict.DEGRADED, Verdict.DEGRADED, Verdict.SERVING]


def test_a_bad_process_is_the_degraded_check_named_before_any_other() -> None:
    stopped = obs(Check.PROCESS, Kind.BAD_PROCESS, 3.0, "VLLM::EngineCore pid 42 is stopped (state T)")
    judge = judged(error(1.0), stopped)
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check, verdict.process) == (
        Verdict.DEGRADED,
        Check.PROCESS,
        stopped.detail,
    )
    judge.observe(obs(Check.PROCESS, Kind.OK, 4.0))
    verdict = judge.judgement()
    assert (verdict.verdict, verdict.check, verdict.process) == (Verdict.DEGRADED, Check.CANARY, None)
    judge.observe(ok(5.0))
    assert judge.judgement() == Judgement(Verdict.SERVING)


def test_every_verdict_names_the_bad_process_while_it_stands() -> None:
    stopped = obs(Check.PROCESS, Kind.BAD_PROCESS, 3.0, "VLLM::EngineCore pid 42 is stopped (state T)")
    for series in (
        [stopped, low_memory(5.0), low_memory(10.0)],
        [stopped, error(11.0), error(12.0)],
        [stopped, obs(Check.LEAK, Kind.LEAK, 20.0, "grew")],
    ):
        verdict = judged(*series).judgement()
        assert verdict.verdict.is_final and verdict.process == stopped.detail, series


def test_a_judgement_is_the_same_by_verdict_and_check_whatever_its_words() -> None:
    a = Judgement(Verdict.DEGRADED, Check.CANARY, "canary: HTTP 500", {"status": 500})
    assert a.same_as(Judgement(Verdict.DEGRADED, Check.CANARY, "canary: HTTP 502"))
    assert not a.same_as(Judgement(Verdict.DEGRADED, Check.HEALTH, "canary: HTTP 500"))
    assert not a.same_as(Judgement(Verdict.FAILING, Check.CANARY, "canary: HTTP 500"))
    assert not a.same_as(None)
    assert Judgement(Verdict.WEDGED, Check.HEALTH, "d", {"misses": 2}, process="p").to_json() == {
        "verdict": "wedged",
        "check": "health",
        "detail": "d",
        "process": "p",
        "figures": {"misses": 2},
    }
