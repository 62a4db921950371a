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
