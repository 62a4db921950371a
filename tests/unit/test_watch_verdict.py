"""The serving watch's rules, fed observations at chosen times (the times are the fake clock)."""

from __future__ import annotations

from launcher.watch.verdict import Check, Judge, Kind, Observation, Rules, Verdict


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
        obs(Check.METRICS, Kind.PROGRESS, t, tokens_moved=True, running=256) for t in (3.0, 8.0, 13.0, 18.0)
    ]
    judge = judged(moving[0], moving[1], timeout(11.0), moving[2], moving[3], timeout(22.0))
    assert judge.judgement().verdict is Verdict.SERVING


def test_tokens_that_moved_before_the_canary_was_sent_excuse_nothing() -> None:
    judge = judged(obs(Check.METRICS, Kind.PROGRESS, 0.5, tokens_moved=True), timeout(11.0), timeout(22.0))
    assert judge.judgement().verdict is Verdict.WEDGED  # sent at 1.0 and 12.0: nothing moved since


def test_one_miss_during_a_stalled_decode_is_wedged() -> None:
    stall = obs(Check.METRICS, Kind.STALLED, 10.0, "1 requests running and the counter frozen for 10 s")
    judge = judged(stall)
    assert judge.judgement().verdict is Verdict.DEGRADED
    judge.observe(timeout(21.0))
    verdict = judge.judgement()
    assert verdict.verdict is Verdict.WEDGED and "decode stalled" in verdict.detail


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
