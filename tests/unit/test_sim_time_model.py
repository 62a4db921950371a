"""The simulator's startup time model against the real vLLM 0.26.0 runs, and the gate deadlines of
every profile against it: a deadline tuned on the simulator at `--sim-speed 1` holds on the real
tiny model (vllm_sim/timing.py; docs/simulator.md "Time model")."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from gates.registry import build_chain
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from tests.conftest import REPO
from vllm_sim.timing import STARTUP_S, Timing

DATA = REPO / "tests" / "data" / "real-vllm-0.26"
READY_RUNS = ("tiny.log", "tiny-ngram.log", "eager/vllm.log")
STAMP = re.compile(r"^\(\w+ pid=\d+\) [A-Z]+ (\d\d-\d\d \d\d:\d\d:\d\d) ")
# the gates that wait on the startup itself (their deadline runs from the launch)
STARTUP_GATES = ("kernel_marker", "graph_capture", "health")
PROFILE_DIRS = (REPO / "profiles", REPO / "scripts" / "real-vllm" / "profiles")


def real_startup_s(log: Path) -> float:
    """From the first logged line to the server's start line: the part the simulator models."""
    stamps = [
        (datetime.strptime(m[1], "%m-%d %H:%M:%S"), line)
        for line in log.read_text(encoding="utf-8").splitlines()
        if (m := STAMP.match(line))
    ]
    start = stamps[0][0]
    ready = next(t for t, line in stamps if "Starting vLLM server on" in line)
    return (ready - start).total_seconds()


def simulated_startup_s(eager: bool) -> float:
    return sum(v for k, v in STARTUP_S.items() if not (eager and k in ("compile", "capture", "warmup")))


def test_the_startup_at_speed_1_lasts_as_long_as_the_real_ones() -> None:
    real = {name: real_startup_s(DATA / name) for name in READY_RUNS}
    assert min(real.values()) >= 40 and max(real.values()) <= 70, real  # 44, 64 and 59 s
    assert min(real.values()) <= simulated_startup_s(eager=False) <= max(real.values())
    assert abs(simulated_startup_s(eager=True) - real["eager/vllm.log"]) <= 15


@pytest.mark.parametrize(
    ("folder", "name"),
    [(d, p.stem) for d in PROFILE_DIRS for p in sorted(d.glob("*.toml")) if p.stem != "base"],
)
def test_every_profiles_startup_deadlines_hold_at_real_speed(folder: Path, name: str) -> None:
    candidate = Candidate.from_plan(build_plan(folder, name))
    chain = build_chain(list(candidate.gate_order), candidate.gate_tables)
    waiting = [gate for gate in chain if gate.name in STARTUP_GATES]
    assert waiting, candidate.gate_order
    for gate in waiting:
        assert gate.timeout_s >= 2 * simulated_startup_s(candidate.expect.enforce_eager), (
            gate.name,
            gate.timeout_s,
        )


def test_the_startup_speed_scales_the_startup_alone_and_the_engine_speed_the_rest() -> None:
    """The suites start at --sim-startup-speed 1000 and serve at their own speed (docs/simulator.md)."""
    tests = Timing(speed=10.0, startup_speed=1000.0)
    assert tests.startup("api") == pytest.approx(12.0 / 1000)
    assert tests.once(2.7) == pytest.approx(2.7 / 1000), "a one-off setup cost goes at the startup speed"
    assert tests.scaled(0.012) == pytest.approx(0.0012), "serving goes at the engine speed"
    plain = Timing(speed=10.0)
    assert plain.startup("settle") == pytest.approx(1.3), "no startup speed: the engine speed for both"
    assert sum(Timing().startup(phase) for phase in STARTUP_S) == pytest.approx(57.7)


def test_the_documented_step_costs_are_the_defaults() -> None:
    """docs/simulator.md "Time model": 12 ms a decode step, 0.08 ms a sequence, 40 us a prefill
    token, eager 3x, drafts accepted at 0.8."""
    default = Timing()
    assert (default.decode_ms, default.decode_ms_per_seq, default.prefill_us_per_token) == (12.0, 0.08, 40.0)
    assert (default.eager_factor, default.spec_acceptance, default.speed) == (3.0, 0.8, 1.0)
