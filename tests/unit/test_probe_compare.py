"""Arms against arm 0 on recorded numbers: the field notes' GDN and warm-up episodes (000_*.txt).

The operator's A/B on 4x V100: GDN fusion on (production) c1 123.1 / 123.6 tok/s, c8 67.9 / 67.8;
off (the arm, verified twice after it shipped) c1 152.6 / 152.9, c8 76.5 / 77.1, c8 total "about
273" on both sides. The first try of that arm had c8 14.6 tok/s with cold TTFT 0.43 s where every
other run had 0.16 s: a first run after a restart, which sent a good change back as a regression.
"""

from __future__ import annotations

from typing import Any

import pytest

from launcher.probe.compare import FlagKind, MetricKey, Verdict, bench_flags, compare

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
