"""Real `vllm-sim` processes on a simulated GPU set (basis/simgpus.py, vllm_sim/gpu_set.py), read
as the launcher reads it (`SimGpuProbe`): each model process holds util × (total − reserved), a
start that does not fit fails with vLLM's free-memory error, one that fits runs beside it, sleep
drops the hold to the residue and a wake takes it back (or fails as a CUDA OOM when the set has no
room), and what a SIGKILLed engine held is free again.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests

from basis import simgpus
from basis.simgpus import SimGpuSet
from launcher.host.gpu import MIB
from launcher.host.gpu_sim import SimGpuProbe
from launcher.host.preflight import check_host
from launcher.host.report import CheckName, CheckStatus
from launcher.host.request import HostRequest
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions
from tests.simserver import HANG_S, SimHandle, free_port, kill_group, running_sim, start_sim, titled
from vllm_sim.memory import weights_gib
from vllm_sim.sleep_mode import residue_gib

pytestmark = pytest.mark.integration

MODEL = "Qwen/Qwen3-1.7B"
TOTAL_MIB, RESERVED_MIB = 81559, 559  # an H100's figures: 81,000 MiB as CUDA counts it
USABLE_MIB = TOTAL_MIB - RESERVED_MIB
SLEEPY = ["--sim-vllm-version", "0.26", "--enable-sleep-mode"]
RESIDUE_MIB = round(residue_gib(weights_gib(MODEL, None)) * 1024)


@pytest.fixture
def gpu_set(tmp_path: Path) -> Iterator[Path]:
    simgpus.create(tmp_path / "gpus", 2, TOTAL_MIB, reserved_mib=RESERVED_MIB)
    yield tmp_path / "gpus"


def util(value: float) -> list[str]:
    return ["--gpu-memory-utilization", str(value)]


def on_set(directory: Path, **extra: str) -> dict[str, str]:
    return {"VLLM_SIM_GPU_SET": str(directory), "VLLM_SERVER_DEV_MODE": "1", **extra}


def engine_pid(sim: SimHandle, title: str = "VLLM::EngineCore") -> int:
    [proc] = titled(sim, title)
    return int(proc.pid)


def held_by(directory: Path, index: int = 0) -> dict[int, int]:
    """pid → MiB on device `index`, as the launcher's probe reads it."""
    with SimGpuProbe(directory) as probe:
        assert probe.skip_reason() is None
        return {p.pid: (p.used_bytes or 0) // MIB for p in probe.processes(index)}


def free_mib(directory: Path, index: int = 0) -> int:
    with SimGpuProbe(directory) as probe:
        return probe.devices()[index].free_bytes // MIB


def events_of(directory: Path, pid: int) -> list[tuple[str, dict[int, int]]]:
    return [(e.event, dict(e.gpus)) for e in SimGpuSet(directory).events() if e.pid == pid]


def test_a_start_that_fits_runs_beside_one_that_does_not_fails_and_a_kill_frees(gpu_set: Path) -> None:
    half, fits = int(0.5 * USABLE_MIB), int(0.3 * USABLE_MIB)
    with running_sim(util(0.5), on_set(gpu_set), model=MODEL) as first:
        one = engine_pid(first)
        assert held_by(gpu_set) == {one: half}
        assert [h.state for h in SimGpuSet(gpu_set).holders()] == ["loaded"]
        assert events_of(gpu_set, one) == [("load_begin", {0: half}), ("load_end", {0: half})]

        refused = start_sim(util(0.6), on_set(gpu_set), model=MODEL)
        try:
            assert refused.proc.wait(HANG_S) != 0
            text = refused.drained()
        finally:
            kill_group(refused)
        # vLLM's request_memory refusal (vllm-facts.md §5.2) with the set's figures: 40,500 of 81,000 MiB
        assert (
            "ValueError: Free memory on device cuda:0 (39.55/79.10 GiB) on startup is less than desired "
            "GPU memory utilization (0.6, 47.46 GiB)."
        ) in text

        with running_sim(util(0.3), on_set(gpu_set), model=MODEL) as beside:
            two = engine_pid(beside)
            assert held_by(gpu_set) == {one: half, two: fits}
            assert free_mib(gpu_set) == USABLE_MIB - half - fits
            kill_group(first)  # SIGKILL: its file stays, and counts for nothing
            gone(one)  # the engine core is the API server's child: it dies a moment after the signal
            assert held_by(gpu_set) == {two: fits}
            assert free_mib(gpu_set) == USABLE_MIB - fits
            assert not (gpu_set / "held" / f"{one}.json").exists(), "pruned by the reader"
    starts = [e.pid for e in SimGpuSet(gpu_set).events() if e.event == "load_begin"]
    assert starts == [one, two], "the refused start never held anything"


def gone(pid: int) -> None:
    """Wait until `pid` has ended (a zombie counts as ended: it holds no GPU memory)."""
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still runs after SIGKILL")


def test_sleep_drops_to_the_residue_and_a_wake_without_room_fails_as_cuda_oom(gpu_set: Path) -> None:
    half = int(0.5 * USABLE_MIB)
    with running_sim([*SLEEPY, *util(0.5)], on_set(gpu_set), model=MODEL) as sleeper:
        pid = engine_pid(sleeper)
        assert requests.post(sleeper.url + "/sleep?level=1", timeout=HANG_S).status_code == 200
        assert held_by(gpu_set) == {pid: RESIDUE_MIB}
        assert [h.state for h in SimGpuSet(gpu_set).holders()] == ["asleep"]

        taker = start_sim(util(0.6), on_set(gpu_set), model=MODEL)  # the room the sleeper gave back
        try:
            assert taker.wait_for("Application startup complete.", HANG_S)
            other = engine_pid(taker)
            woken = requests.post(sleeper.url + "/wake_up", timeout=HANG_S)
            assert woken.status_code == 500
            assert "Call to wake_up method failed: CUDA Error: out of memory at " in woken.text
            assert sleeper.wait_for("Invocation of wake_up method failed", HANG_S)
            assert sleeper.wait_for("stderr\tCUDA Error: out of memory at ", HANG_S)
            assert requests.get(sleeper.url + "/is_sleeping", timeout=HANG_S).json() == {"is_sleeping": True}
            assert held_by(gpu_set)[pid] == RESIDUE_MIB, "a failed wake holds nothing more"

            os.kill(taker.proc.pid, signal.SIGTERM)  # a stop: the engine gives its memory back
            assert taker.proc.wait(HANG_S) == 0
        finally:
            kill_group(taker)
        assert events_of(gpu_set, other)[-1] == ("exit", {0: int(0.6 * USABLE_MIB)})

        assert requests.post(sleeper.url + "/wake_up", timeout=HANG_S).status_code == 200
        assert held_by(gpu_set) == {pid: half}
    assert [e for e, _ in events_of(gpu_set, pid)] == ["load_begin", "load_end", "sleep", "wake"]


def test_tensor_parallel_workers_hold_their_devices_of_the_set(gpu_set: Path) -> None:
    quarter = int(0.25 * USABLE_MIB)
    env = on_set(gpu_set, CUDA_VISIBLE_DEVICES="1,0")  # rank 0 on device 1, rank 1 on device 0
    with running_sim(["--tensor-parallel-size", "2", *util(0.25)], env, model=MODEL) as sim:
        rank0, rank1 = engine_pid(sim, "VLLM::Worker_TP0"), engine_pid(sim, "VLLM::Worker_TP1")
        assert held_by(gpu_set, 1) == {rank0: quarter} and held_by(gpu_set, 0) == {rank1: quarter}
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.proc.wait(HANG_S) == 0
    assert held_by(gpu_set, 0) == {} and held_by(gpu_set, 1) == {}
    assert [e for e, _ in events_of(gpu_set, rank0)] == ["load_begin", "load_end", "exit"]
    assert events_of(gpu_set, rank1) == [
        ("load_begin", {0: quarter}),
        ("load_end", {0: quarter}),
        ("exit", {0: quarter}),
    ]


def test_a_set_that_cannot_serve_the_start_is_refused_before_the_engine(tmp_path: Path) -> None:
    simgpus.create(tmp_path / "one", 1, TOTAL_MIB)
    env = on_set(tmp_path / "one", CUDA_VISIBLE_DEVICES="3")
    refused = start_sim([], env, model=MODEL)
    try:
        assert refused.proc.wait(HANG_S) != 0
        text = refused.drained()
    finally:
        kill_group(refused)
    assert "CUDA_VISIBLE_DEVICES='3' does not name 1 of its 1 device(s)" in text.splitlines()[-1]
    assert "vllm_sim" not in text, "a refusal as vLLM words one, no traceback of the simulator's own"


def test_preflight_reads_the_set_a_simulator_profile_names(gpu_set: Path, tmp_path: Path) -> None:
    """The launcher's own check, before it starts anything: the set's holder is named, and the
    report says the GPUs are simulated."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "p.toml").write_text(
        f'[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "{MODEL}"\nport = {free_port()}\n'
        f'[args]\ngpu_memory_utilization = 0.6\n[env]\nVLLM_SIM_GPU_SET = "{gpu_set}"\n'
    )
    plan = build_plan(profiles, "p")
    assert not plan.errors, plan.errors
    request = HostRequest.from_plan(plan)
    options = GlobalOptions(profiles_dir=profiles, state_dir=tmp_path / "state")
    with running_sim(util(0.5), on_set(gpu_set), model=MODEL) as sim:
        pid = engine_pid(sim)
        report = check_host(request, options, environ={})
    gone(pid)  # the engine core ends a moment after its API server
    memory = report.check(CheckName.GPU_MEMORY)
    assert memory.status is CheckStatus.REFUSED
    assert "GPU 0: free 39.55 GiB" in memory.detail and f"pid {pid} VLLM::EngineCore" in memory.detail
    assert f"the simulated GPU set at {gpu_set}, not hardware" in report.render_text()
    after = check_host(request, options, environ={})
    assert after.check(CheckName.GPU_MEMORY).status is CheckStatus.OK, "the killed simulator holds nothing"
