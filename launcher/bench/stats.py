"""Order statistics for small samples: median, percentile and the spread between rounds.

Percentiles interpolate linearly between order statistics (numpy's default, "linear"), so p50 is
the median; an empty sample has no statistic (None), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def _clean(values: Iterable[float | None]) -> list[float]:
    return sorted(v for v in values if v is not None and not math.isnan(v))


def percentile(values: Iterable[float | None], pct: float) -> float | None:
    """The `pct`-th percentile (0..100) with linear interpolation; None for no values."""
    data = _clean(values)
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    rank = (len(data) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


def median(values: Iterable[float | None]) -> float | None:
    return percentile(values, 50.0)


def spread(values: Sequence[float | None]) -> float | None:
    """(max - min) / median of per-round values: 0.05 means the rounds disagree by 5 %."""
    data = _clean(values)
    mid = median(data)
    if len(data) < 2 or not mid:
        return None
    return (data[-1] - data[0]) / abs(mid)


def diffs(times: Sequence[float]) -> list[float]:
    """Gaps between consecutive timestamps."""
    return [b - a for a, b in zip(times, times[1:], strict=False)]
