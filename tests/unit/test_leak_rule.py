"""The leak rule on series shaped like the field's: warm-up plateaus pass, real leaks fail."""

from __future__ import annotations

import pytest

from gates.leak_rule import LeakRule, judge

RULE = LeakRule()


def test_allocator_warm_up_then_plateau_is_not_a_leak() -> None:
    # +500 MiB in window 1 (the old rule killed a healthy server for this), +300 in window 2, then flat.
    series = [9500.0, 9800.0, 9810.0, 9805.0, 9812.0, 9811.0]
    result = judge(series, RULE)
    assert result.judged and not result.leak


def test_single_large_jump_after_baseline_is_not_a_leak() -> None:
    series = [1000.0, 1100.0, 2600.0, 2600.0, 2600.0, 2600.0]
    assert not judge(series, RULE).leak


def test_three_growing_windows_over_a_gib_is_a_leak() -> None:
    series = [1000.0, 1200.0, 1700.0, 2200.0, 2700.0, 3200.0]
    result = judge(series, RULE)
    assert result.leak and "over the baseline (1200 MiB" in result.reason


def test_slow_growth_under_the_threshold_is_not_a_leak() -> None:
    series = [1000.0, 1000.0, 1100.0, 1200.0, 1300.0, 1400.0]
    result = judge(series, RULE)
    assert result.longest_growing_run == 4 and not result.leak


def test_too_few_windows_is_never_a_pass() -> None:
    result = judge([1.0, 2.0, 3.0], RULE)
    assert not result.judged and not result.leak and "needs 5" in result.reason


# ---- the rule's edges: each threshold at, under and over -----------------------------------------
@pytest.mark.parametrize(
    ("series", "leak"),
    [
        ([1000.0, 1000.0, 1300.0, 1700.0, 2024.0], False),  # +1024 MiB exactly: not over it
        ([1000.0, 1000.0, 1300.0, 1700.0, 2024.5], True),
        ([1000.0, 1000.0, 2000.0, 3000.0, 4000.0], True),  # 3 growing windows exactly
        ([1000.0, 1000.0, 1000.0, 3000.0, 4000.0], False),  # 2 growing windows, however large
        ([1000.0, 1000.0, 2000.0, 2000.0, 3000.0, 4000.0], False),  # a flat window breaks the run
        ([1000.0, 1000.0, 2000.0, 1900.0, 2500.0, 2600.0, 2700.0], True),  # 3 again after a dip
        ([1000.0, 1000.0, 2000.0, 1900.0, 2500.0, 2600.0], False),  # only 2 since the dip
    ],
)
def test_a_leak_is_consecutive_growth_and_more_than_min_growth_over_the_baseline(
    series: list[float], leak: bool
) -> None:
    assert judge(series, RULE).leak is leak


def test_growth_before_the_baseline_neither_counts_in_the_run_nor_in_the_total() -> None:
    series = [1000.0, 5000.0, 5100.0, 5200.0, 5300.0]  # +4000 into window 2, then +100 a window
    result = judge(series, RULE)
    assert (result.leak, result.baseline_mib, result.growth_mib, result.longest_growing_run) == (
        False,
        5000.0,
        300.0,
        3,
    )


def test_the_run_and_the_growth_must_hold_in_the_same_window() -> None:
    """Three small steps, a plateau, then one big jump: the run was over before the growth came."""
    series = [1000.0, 1000.0, 1100.0, 1200.0, 1300.0, 1300.0, 2600.0]
    result = judge(series, RULE)
    assert not result.leak and result.longest_growing_run == 3 and result.growth_mib == 1600.0


def test_a_leak_that_stopped_growing_is_still_a_leak_told_at_the_window_it_was_found() -> None:
    series = [1000.0, 1000.0, 1500.0, 2000.0, 2500.0, 2500.0, 2400.0]
    result = judge(series, RULE)
    assert result.leak and result.growth_mib == 1400.0  # to the last window
    assert result.reason == (
        "grew 3+ windows in a row to +1500 MiB over the baseline (1000 MiB at the end of window 2) > 1024 MiB"
    )


def test_the_baseline_window_is_where_the_rule_starts_counting() -> None:
    first = LeakRule(baseline_window=1, consecutive=3, min_growth_mib=1024)
    series = [1000.0, 1400.0, 1800.0, 2100.0]
    assert judge(series, first).leak  # baselined at window 1: +1100 in 3 growing windows
    assert not judge(series + [2100.0], RULE).leak  # baselined at window 2: 3 windows, +700


def test_exactly_the_windows_the_rule_needs_are_judged_one_fewer_are_not() -> None:
    rule = LeakRule(baseline_window=2, consecutive=2, min_growth_mib=10)
    assert rule.windows_needed == 4
    assert judge([100.0, 100.0, 200.0, 300.0], rule).leak
    short = judge([100.0, 100.0, 200.0], rule)
    assert (short.judged, short.leak, short.baseline_mib) == (False, False, None)
    assert short.reason == "3 windows measured; the rule needs 4"


def test_no_leak_says_how_far_the_series_got_against_the_rule() -> None:
    result = judge([9500.0, 9800.0, 9900.0, 9850.0, 9950.0, 10000.0], RULE)
    assert result.reason == (
        "+200 MiB since the baseline (9800 MiB), longest growing run 2 window(s): "
        "no leak (needs 3 growing windows and > 1024 MiB)"
    )
    assert judge([2000.0, 1800.0, 1700.0, 1600.0, 1500.0], RULE).growth_mib == -300.0  # shrinking is fine
