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
        return self.once(STARTUP_S[phase])

    def once(self, seconds: float) -> float:
        """A one-off setup cost (a startup phase, the first sleep's pinning): at the startup speed."""
        return seconds / (self.startup_speed or self.speed)


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


# Sleep mode, measured under the real vLLM 0.26.0 on one H200 (docs/simulator.md "Sleep mode"): the
# tiny model (≈0 GiB of weights) and a random Qwen2 of 2.84 B parameters (5.29 GiB of bf16 weights,
# 4.87 GiB of them in the CuMem pool). Two points each, fitted on the weights per GPU.
MEASURED_WEIGHTS_GIB = 5.29
WAKE_BASE_S = 0.075  # tiny: /wake_up → first completion 0.06–0.09 s
WAKE_S_PER_GIB = (0.275 - WAKE_BASE_S) / MEASURED_WEIGHTS_GIB  # 2.84 B: 0.23–0.32 s (≈26 GiB/s to the GPU)
SLEEP_BASE_S = 0.145  # /sleep?level=1, tiny: 0.12–0.17 s; the 2.84 B model's later sleeps: 0.14–0.17 s
# The 2.84 B model's first level-1 sleep: 2.7 s (a later H200 session, parking for the front door; 3.25 s in
# tests/data/real-vllm-0.26/h200-4/i32/big-sleep). vLLM copies the weights into a pinned host tensor
# on every sleep (0.26.0 device_allocator/cumem.py:257-264); presumably only the first has to pin
# fresh pages, later ones reuse the blocks torch's caching host allocator kept (vllm-facts.md §12).
FIRST_SLEEP_S = 2.7
PIN_S_PER_GIB = (FIRST_SLEEP_S - SLEEP_BASE_S) / MEASURED_WEIGHTS_GIB


def sleep_seconds(weights_gib: float, level: int, first: bool, timing: Timing) -> float:
    """Level 1 copies the weights to host memory: slow the first time (pinning the host buffers, a
    one-off cost scaled as the startup is), fast after. Level 2 copies nothing; level 0 only pauses
    the scheduler."""
    if level < 1:
        return 0.0
    pin = PIN_S_PER_GIB * weights_gib if level == 1 and first else 0.0
    return timing.scaled(SLEEP_BASE_S) + timing.once(pin)


def wake_seconds(weights_gib: float, weights_back: bool, speed: float) -> float:
    """Waking copies the offloaded weights back (level 1); after level 2 there is nothing to copy."""
    return (WAKE_BASE_S + (WAKE_S_PER_GIB * weights_gib if weights_back else 0.0)) / speed
