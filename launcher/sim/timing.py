"""The simulated clock's constants: one speed multiplier and the per-step costs (see scheduler.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timing:
    speed: float = 1.0
    decode_ms: float = 12.0
    decode_ms_per_seq: float = 0.08
    eager_factor: float = 3.0
    prefill_us_per_token: float = 40.0
    spec_acceptance: float = 0.8
    watchdog_s: float = 5.0

    def scaled(self, seconds: float) -> float:
        return seconds / self.speed


def timing_from(ns: argparse.Namespace) -> Timing:
    return Timing(
        speed=ns.sim_speed,
        decode_ms=ns.sim_decode_ms,
        decode_ms_per_seq=ns.sim_decode_ms_per_seq,
        eager_factor=ns.sim_eager_factor,
        prefill_us_per_token=ns.sim_prefill_us_per_token,
        spec_acceptance=ns.sim_spec_acceptance,
        watchdog_s=ns.sim_watchdog_s,
    )
