"""Arms against arm 0 on recorded numbers: the field notes' GDN and warm-up episodes (000_*.txt).

The operator's A/B on 4x V100: GDN fusion on (production) c1 123.1 / 123.6 tok/s, c8 67.9 / 67.8;
off (the arm, verified twice after it shipped) c1 152.6 / 152.9, c8 76.5 / 77.1, c8 total "about
273" on both sides. The first try of that arm had c8 14.6 tok/s with cold TTFT 0.43 s where every
other run had 0.16 s: a first run after a restart, which sent a good change back as a regression.
"""

from __future__ import annotations

from typing import Any

import pytest

from launcher.probe.compare import (
    Better,
    Delta,
    FlagKind,
    MetricKey,
    Sample,
    Stat,
    Verdict,
    arm_stats,
    bench_flags,
    compare,
    delta,
    samples,
    warmup_effect,
)

C1_DECODE = MetricKey("8k", 1, "decode_tok_s")
C8_DECODE = MetricKey("8k", 8, "decode_tok_s")
C8_TOTAL = MetricKey("8k", 8, "total_tok_s")
COLD = MetricKey("8k", 0, "cold_ttft_s")
C1_TTFT = MetricKey("8k", 1, "ttft_s")


def run(
    cold: float, c1: float, c8: float, total8: float, *, ttft: float = 0.05, rounds: float = 0.01
) -> dict[str, Any]:
    """One bench summary as `launch bench` writes it (only the fields the probe reads)."""

    def cell(c: int, decode: float, total: float) -> dict[str, Any]:
        spread = {"ttft_s": rounds, "decode_tok_s": rounds, "total_tok_s": rounds}
        values = {"ttft_s": ttft, "decode_tok_s": decode, "total_tok_s": total}
        return {"context": "8k", "concurrency": c, **values, "spread": spread, "flags": []}

    return {
        "contexts": [{"context": "8k", "cold_ttft_s": cold, "spread": rounds, "flags": []}],
        "cells": [cell(1, c1, c1 * 0.9), cell(8, c8, total8)],
        "flags": [{"flag": "fresh-server", "message": "restarted"}],
    }


PRODUCTION = [run(0.16, 123.1, 67.9, 272.0), run(0.16, 123.6, 67.8, 274.0)]
GDN_OFF = [run(0.16, 152.6, 76.5, 273.5), run(0.16, 152.9, 77.1, 272.5)]


def test_the_gdn_arm_is_better_outside_noise_and_total_throughput_is_noise() -> None:
    prod, gdn = compare([("prod", PRODUCTION), ("gdn0", GDN_OFF)])
    c1 = gdn.deltas[C1_DECODE]
    assert c1.verdict is Verdict.BETTER and c1.relative == pytest.approx(152.75 / 123.35 - 1)  # +24 %
    assert gdn.deltas[C8_DECODE].verdict is Verdict.BETTER
    total = gdn.deltas[C8_TOTAL]  # "c8 的總吞吐兩邊都是 273 左右"
    assert total.verdict is Verdict.NOISE and total.relative == pytest.approx(0.0)
    assert prod.deltas == {} and gdn.flags == () and not gdn.unsettled
    assert {k for k, _ in gdn.outside_noise()} == {C1_DECODE, MetricKey("8k", 1, "total_tok_s"), C8_DECODE}


def test_a_first_run_after_restart_is_detected_and_left_out() -> None:
    first_try = [run(0.43, 150.0, 14.6, 120.0), run(0.16, 152.6, 76.5, 273.5)]
    _, gdn = compare([("prod", PRODUCTION), ("gdn0", first_try)])
    [flag] = gdn.flags
    assert flag.kind is FlagKind.WARMUP and "0.430 s vs 0.160 s" in flag.message
    assert "values use run 2 only (add --runs 3 to keep a spread)" in flag.message
    stat = gdn.stats[C8_DECODE]
    assert stat.runs == (14.6, 76.5) and stat.used == (2,) and stat.value == 76.5
    # With run 1 in, the median (45.6) would have read as a 33 % regression; left out, it is a gain.
    assert gdn.deltas[C8_DECODE].verdict is Verdict.BETTER


def test_a_slow_first_decode_alone_is_a_warm_up_too() -> None:
    runs = [run(0.16, 90.0, 67.9, 273.0), run(0.16, 123.5, 67.9, 273.0), run(0.16, 123.2, 67.8, 273.0)]
    _, arm = compare([("prod", PRODUCTION), ("again", runs)])
    assert arm.flags[0].kind is FlagKind.WARMUP and "90.0 vs 123.3" in arm.flags[0].message
    assert arm.stats[C1_DECODE].used == (2, 3) and arm.deltas[C1_DECODE].verdict is Verdict.NOISE


def test_runs_that_disagree_flag_the_arm_as_unsettled() -> None:
    noisy = [run(0.16, 160.0, 67.9, 273.0), run(0.16, 125.0, 67.8, 273.0)]  # run 1 faster: not a warm-up
    _, arm = compare([("prod", PRODUCTION), ("noisy", noisy)])
    assert [f.kind for f in arm.flags] == [FlagKind.DISAGREE] and arm.unsettled
    assert "8k c1 decode tok/s 25% apart" in arm.flags[0].message
    # the spread of the runs is the noise band: +15 % inside a 25 % spread is noise
    assert arm.deltas[C1_DECODE].verdict is Verdict.NOISE


def test_lower_is_better_for_ttft_and_a_few_ms_on_a_tiny_ttft_is_no_disagreement() -> None:
    slower = [run(0.16, 123.0, 67.9, 273.0, ttft=0.080), run(0.16, 123.4, 67.9, 273.0, ttft=0.090)]
    _, arm = compare([("prod", PRODUCTION), ("slower", slower)])
    d = arm.deltas[C1_TTFT]
    assert d.relative == pytest.approx(0.085 / 0.05 - 1) and d.verdict is Verdict.WORSE
    assert arm.flags == ()  # 0.080 vs 0.090 s is 12 % apart but only 10 ms: no disagreement flag


def test_one_run_has_no_run_spread_and_is_judged_on_round_spread() -> None:
    _, arm = compare([("prod", PRODUCTION[:1]), ("once", GDN_OFF[:1])])
    assert [f.kind for f in arm.flags] == [FlagKind.SINGLE_RUN]
    stat = arm.stats[C1_DECODE]
    assert stat.run_spread is None and stat.noise == 0.01
    assert arm.deltas[C1_DECODE].band == 0.01 and arm.deltas[C1_DECODE].verdict is Verdict.BETTER


def test_an_arm_without_runs_has_no_numbers_and_no_deltas() -> None:
    _, rejected, measured = compare([("prod", PRODUCTION), ("rejected", ()), ("gdn0", GDN_OFF)])
    assert rejected.stats == {} and rejected.deltas == {} and measured.deltas


def test_bench_flags_of_every_run_are_kept_but_fresh_server_is_expected() -> None:
    flagged = run(0.16, 123.1, 67.9, 272.0)
    flagged["cells"][1]["flags"] = [{"flag": "queued", "message": "chk 3.1"}]
    assert bench_flags([flagged, *PRODUCTION]) == ("queued",)


# ---- the decisions one at a time --------------------------------------------------------------------


def stat(value: float | None, run_spread: float | None = None, round_spread: float | None = None) -> Stat:
    return Stat((value,), (1,), value, run_spread, round_spread)


def test_a_delta_inside_the_larger_noise_band_of_the_two_arms_is_noise() -> None:
    base = stat(100.0, run_spread=0.02, round_spread=0.01)
    arm = stat(105.0, run_spread=0.01, round_spread=0.05)  # its own round-to-round spread is widest
    d = delta(arm, base, Better.HIGHER)
    assert d.band == 0.05 and d.relative == pytest.approx(0.05) and d.verdict is Verdict.NOISE
    assert delta(stat(105.1, round_spread=0.05), base, Better.HIGHER).verdict is Verdict.BETTER


def test_which_way_is_better_depends_on_the_metric() -> None:
    base, faster = stat(0.200, round_spread=0.01), stat(0.150, round_spread=0.01)
    assert delta(faster, base, Better.LOWER).verdict is Verdict.BETTER
    assert delta(faster, base, Better.HIGHER).verdict is Verdict.WORSE
    assert delta(faster, base, Better.LOWER).relative == pytest.approx(-0.25)


def test_no_value_no_base_or_no_band_is_not_a_verdict() -> None:
    assert delta(stat(None), stat(100.0, 0.1), Better.HIGHER).verdict is Verdict.UNKNOWN
    assert delta(stat(10.0, 0.1), stat(0.0, 0.1), Better.HIGHER) == Delta(None, None, Verdict.UNKNOWN)
    unbanded = delta(stat(150.0), stat(100.0), Better.HIGHER)  # neither spread known
    assert unbanded == Delta(0.5, None, Verdict.UNKNOWN)  # the change is known, its meaning is not


def test_the_band_of_a_stat_is_its_larger_spread() -> None:
    assert stat(1.0, 0.03, 0.07).noise == 0.07 and stat(1.0, 0.03, None).noise == 0.03
    assert stat(1.0).noise is None


def test_run_one_at_exactly_the_warm_up_limits_is_kept() -> None:
    at_limit = [run(0.24, 120.0, 67.9, 273.0), run(0.16, 150.0, 67.9, 273.0)]  # TTFT 1.5x, decode 0.8x
    assert warmup_effect([samples(s) for s in at_limit]) is None
    past = [run(0.2401, 120.0, 67.9, 273.0), run(0.16, 150.0, 67.9, 273.0)]
    found = warmup_effect([samples(s) for s in past])
    assert found is not None and found.message == "run 1 8k TTFT cold 0.240 s vs 0.160 s in later runs"


def test_a_warm_up_needs_twenty_ms_on_ttft_however_large_the_ratio() -> None:
    tiny = [run(0.035, 123.0, 67.9, 273.0, ttft=0.03), run(0.016, 123.0, 67.9, 273.0, ttft=0.01)]
    assert warmup_effect([samples(s) for s in tiny]) is None  # 2.2x and 3x, but 19 and 20 ms
    assert warmup_effect([samples(tiny[0])]) is None  # one run: nothing to compare it with


def test_three_runs_with_a_cold_first_keep_runs_two_and_three() -> None:
    runs = [run(0.43, 150.0, 14.6, 120.0), run(0.16, 152.0, 76.0, 273.0), run(0.16, 153.0, 77.0, 272.0)]
    stats, flags = arm_stats(runs)
    assert [f.kind for f in flags] == [FlagKind.WARMUP] and flags[0].message.endswith(
        "values use runs 2-3 only"
    )
    s = stats[C8_DECODE]
    assert s.used == (2, 3) and s.value == pytest.approx(76.5) and s.run_spread == pytest.approx(1.0 / 76.5)


def test_runs_apart_by_exactly_fifteen_percent_do_not_disagree() -> None:
    # spread (max - min) / median: 115 vs 100 has median 107.5, so 15 / 107.5 is inside; 118 is not
    agree = [run(0.16, 100.0, 67.9, 273.0), run(0.16, 115.0, 67.9, 273.0)]
    assert FlagKind.DISAGREE not in [f.kind for f in arm_stats(agree)[1]]
    apart = [run(0.16, 100.0, 67.9, 273.0), run(0.16, 118.0, 67.9, 273.0)]
    flags = arm_stats(apart)[1]
    assert [f.kind for f in flags] == [FlagKind.DISAGREE]
    # the c1 cell's output tok/s (0.9 x its decode) moved with it: both are named, in key order
    assert flags[0].message == (
        "runs disagree: 8k c1 decode tok/s 17% apart; 8k c1 output tok/s 17% apart; add --runs"
    )


def test_samples_read_the_cold_ttft_per_context_and_three_metrics_per_cell() -> None:
    got = samples(run(0.16, 123.1, 67.9, 272.0, rounds=0.02))
    assert got[COLD] == Sample(0.16, 0.02)
    assert got[MetricKey("8k", 8, "total_tok_s")] == Sample(272.0, 0.02)
    assert len(got) == 1 + 2 * 3
    assert samples({}) == {} and samples({"cells": None, "contexts": None}) == {}


def test_a_cell_without_a_spread_or_a_value_keeps_none_not_zero() -> None:
    bare = {"cells": [{"context": "short", "concurrency": 4, "decode_tok_s": 50.0}]}
    got = samples(bare)
    assert got[MetricKey("short", 4, "decode_tok_s")] == Sample(50.0, None)
    assert got[MetricKey("short", 4, "ttft_s")] == Sample(None, None)


def test_metric_keys_read_as_the_report_labels_them_and_sort_by_cell() -> None:
    assert COLD.label == "8k TTFT cold" and COLD.cell == "8k"
    assert C8_TOTAL.label == "8k c8 output tok/s" and C8_TOTAL.info.better is Better.HIGHER
    assert sorted([C8_DECODE, COLD, C1_DECODE]) == [COLD, C1_DECODE, C8_DECODE]


def test_a_metric_missing_from_one_run_is_none_in_that_run_only() -> None:
    full, partial = run(0.16, 123.0, 67.9, 273.0), run(0.16, 125.0, 67.9, 273.0)
    partial["cells"] = partial["cells"][:1]  # the c8 cell did not run
    stats, _ = arm_stats([full, partial])
    assert stats[C8_DECODE].runs == (67.9, None) and stats[C8_DECODE].value == 67.9
    assert stats[C8_DECODE].run_spread is None  # one value left: no spread


def test_only_deltas_outside_the_noise_are_listed_and_in_key_order() -> None:
    _, arm = compare([("prod", PRODUCTION), ("gdn0", GDN_OFF)])
    keys = [k for k, _ in arm.outside_noise()]
    assert keys == sorted(keys) and all(
        d.verdict in (Verdict.BETTER, Verdict.WORSE) for _, d in arm.outside_noise()
    )


def test_bench_flags_come_from_cells_contexts_and_the_run_and_ignore_odd_entries() -> None:
    summary = run(0.16, 123.1, 67.9, 272.0)
    summary["contexts"][0]["flags"] = [{"flag": "cold-not-cold", "message": "m"}, "not a dict"]
    summary["flags"] = [{"flag": "other-traffic", "message": "m"}, {"flag": "fresh-server", "message": "m"}]
    assert bench_flags([summary]) == ("cold-not-cold", "other-traffic")
