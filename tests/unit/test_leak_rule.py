"""The leak rule on series shaped like the field's: warm-up plateaus pass, real leaks fail."""

from __future__ import annotations

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
