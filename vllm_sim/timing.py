"""The simulated clock's constants: one speed multiplier and the per-step costs (see scheduler.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

# Startup phases at speed 1, in seconds: the tiny model under the real vLLM 0.26.0 on an H200
# (tests/data/real-vllm-0.26/tiny.log, tiny-ngram.log, eager/vllm.log; docs/simulator.md "Time
# model"): the API process's imports and config (api), the engine process's start before its config
# line (spawn), device and weights (loading), torch.compile, profiling, KV cache, JIT warm-up, graph
# capture for 102 graphs, the engine's last steps before `init engine` (settle), and the server's
# start (serve). 58 s in all; the real runs took 45-82 s to `Application startup complete.`
STARTUP_S = {
    "api": 12.0,
    "spawn": 15.0,
    "loading": 3.0,
    "compile": 10.0,
    "profiling": 1.0,
    "kv": 0.5,
    "warmup": 0.2,
    "capture": 1.0,
    "settle": 13.0,
    "serve": 2.0,
}


@dataclass(frozen=True, slots=True)
class Timing:
    speed: float = 1.0
    startup_speed: float | None = None  # startup phases only (default: speed)
    decode_ms: float = 12.0
    decode_ms_per_seq: float = 0.08
    eager_factor: float = 3.0
    prefill_us_per_token: float = 40.0
    spec_acceptance: float = 0.8
    watchdog_s: float = 5.0

    def scaled(self, seconds: float) -> float:
        return seconds / self.speed

    def startup(self, phase: str) -> float:
        """Wall seconds a startup phase takes at this startup speed."""
        return STARTUP_S[phase] / (self.startup_speed or self.speed)


def timing_from(ns: argparse.Namespace) -> Timing:
    return Timing(
        speed=ns.sim_speed,
        startup_speed=ns.sim_startup_speed,
        decode_ms=ns.sim_decode_ms,
        decode_ms_per_seq=ns.sim_decode_ms_per_seq,
        eager_factor=ns.sim_eager_factor,
        prefill_us_per_token=ns.sim_prefill_us_per_token,
        spec_acceptance=ns.sim_spec_acceptance,
        watchdog_s=ns.sim_watchdog_s,
    )
