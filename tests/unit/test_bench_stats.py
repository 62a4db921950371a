"""Order statistics and the chk consistency column."""

from __future__ import annotations

import pytest

from launcher.bench.checks import CHK_QUEUED, Flag, chk, queued
from launcher.bench.stats import diffs, median, percentile, spread


def test_median_and_percentile_interpolate_like_numpy_linear() -> None:
    data = [4.0, 1.0, 3.0, 2.0]
    assert median(data) == pytest.approx(2.5)
    assert percentile(data, 90) == pytest.approx(3.7)
    assert percentile(data, 0) == 1.0 and percentile(data, 100) == 4.0


def test_missing_values_are_ignored_and_no_values_give_none() -> None:
    assert median([None, 2.0, float("nan"), 4.0]) == pytest.approx(3.0)
    assert median([]) is None
    assert percentile([None], 50) is None


def test_spread_is_range_over_median() -> None:
    assert spread([100.0, 105.0, 95.0]) == pytest.approx(0.1)
    assert spread([1.0]) is None


def test_diffs_are_consecutive_gaps() -> None:
    assert diffs([1.0, 1.5, 3.0]) == [0.5, 1.5]
    assert diffs([1.0]) == []


def test_chk_is_per_user_decode_times_users_over_total() -> None:
    # field note: max-num-seqs 8 at c32: per user 67.7 tok/s, total 227 -> 9.55
    assert chk(67.7, 32, 227.0) == pytest.approx(9.54, abs=0.01)
    # after raising max-num-seqs to 32: 36.9 per user, 619 total -> 1.91
    assert chk(36.9, 32, 619.0) == pytest.approx(1.91, abs=0.01)
    assert chk(None, 8, 100.0) is None and chk(50.0, 8, 0.0) is None


def test_queued_flag_only_above_threshold_and_beyond_one_user() -> None:
    found = queued(9.55, 32)
    assert found is not None and found.flag == Flag.QUEUED and "9.55" in found.message
    assert queued(CHK_QUEUED - 0.01, 32) is None
    assert queued(3.0, 1) is None


def test_two_values_interpolate_along_the_line_between_them() -> None:
    assert percentile([20.0, 10.0], 50) == pytest.approx(15.0)
    assert percentile([20.0, 10.0], 25) == pytest.approx(12.5)
    assert percentile([20.0, 10.0], 90) == pytest.approx(19.0)


def test_one_value_is_every_percentile_of_itself() -> None:
    assert [percentile([7.5], p) for p in (0, 1, 50, 99, 100)] == [7.5] * 5


def test_ranks_count_from_zero_over_n_minus_one_gaps() -> None:
    # numpy: rank = (n - 1) * p / 100; [1..10] at p90 is rank 8.1, between 9 and 10
    assert percentile([float(v) for v in range(1, 11)], 90) == pytest.approx(9.1)
    # 101 values 0..100: every integer percentile lands exactly on a value
    hundred = [float(v) for v in range(101)]
    assert percentile(hundred, 99) == pytest.approx(99.0) and percentile(hundred, 37) == pytest.approx(37.0)


def test_an_even_count_medians_the_middle_pair_and_an_odd_count_takes_the_middle() -> None:
    assert median([5.0, 1.0, 9.0]) == 5.0
    assert median([5.0, 1.0, 9.0, 3.0]) == pytest.approx(4.0)  # (3 + 5) / 2, after sorting


def test_a_generator_is_read_once_and_still_gives_the_median() -> None:
    assert median(v for v in (3.0, None, 1.0, 2.0)) == 2.0


def test_only_missing_values_have_no_statistic_at_any_percentile() -> None:
    assert percentile([None, float("nan")], 90) is None and median([float("nan")]) is None


def test_spread_ignores_missing_rounds_and_needs_two_that_remain() -> None:
    assert spread([None, 100.0, 110.0]) == pytest.approx(10.0 / 105.0)
    assert spread([None, 100.0, float("nan")]) is None  # one round left: no spread


def test_spread_of_rounds_centred_on_zero_is_undefined_not_infinite() -> None:
    assert spread([-1.0, 0.0, 1.0]) is None


def test_spread_of_negative_values_is_relative_to_the_medians_size() -> None:
    assert spread([-10.0, -8.0, -12.0]) == pytest.approx(0.4)


def test_rounds_that_agree_have_zero_spread() -> None:
    assert spread([42.0, 42.0, 42.0]) == 0.0


def test_diffs_keep_their_order_and_sign() -> None:
    assert diffs([3.0, 1.0, 4.0]) == [-2.0, 3.0]
    assert diffs([]) == []
