"""Waiting for the box to be free before an arm starts: the port (a real socket) and GPU memory
(FakeGpuProbe naming a real process, whose end gives the memory back as the driver would)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from basis.clock import SystemClock
from launcher.host.gpu import FakeGpuProbe, GpuDevice
from launcher.probe.release import POLL_S, NotReleased, wait_released
from launcher.profile.plan import LaunchPlan, build_plan
from tests.doubles import FakeClock
from tests.simserver import free_port


def plan(profiles_dir: Path, port: int, command: str = "vllm") -> LaunchPlan:
    (profiles_dir / "p.toml").write_text(
        f'[engine]\ncommand = ["{command}", "serve"]\nmodel = "org/tiny"\nport = {port}\n'
        "[args]\ngpu_memory_utilization = 0.5\n"
        '[env]\nCUDA_VISIBLE_DEVICES = "0"\n'
    )
    return build_plan(profiles_dir, "p")


def test_a_held_port_blocks_until_the_deadline_and_says_so(profiles_dir: Path) -> None:
    clock = FakeClock()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(NotReleased) as err:
            wait_released(plan(profiles_dir, port), gone_pids=(), deadline=clock.now + 1, clock=clock,
                          probe_factory=FakeGpuProbe)  # fmt: skip
    assert f"127.0.0.1:{port} is in use by pid {os.getpid()}" in err.value.message and clock.now >= 1001


def test_gpu_memory_still_held_by_the_stopped_server_blocks_the_arm(profiles_dir: Path) -> None:
    clock = FakeClock()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gpu = FakeGpuProbe(total_mib=(32768,))
        gpu.hold(0, server.pid, 32461)  # "Free memory on device cuda:0 (0.3/31.73 GiB)"
        with pytest.raises(NotReleased) as err:
            wait_released(plan(profiles_dir, free_port()), gone_pids={server.pid}, deadline=clock.now + 3,
                          clock=clock, probe_factory=lambda: gpu)  # fmt: skip
    finally:
        server.kill()
        server.wait()
    assert "GPU 0: free 0.30/32.00 GiB, needed 16.00 GiB, still listed: pid" in err.value.message


def test_the_arm_may_start_once_the_memory_is_back(profiles_dir: Path) -> None:
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    gpu = FakeGpuProbe(total_mib=(32768,))
    gpu.hold(0, server.pid, 30000)
    clock = SystemClock()
    deadline = clock.monotonic() + 20
    released = wait_released(plan(profiles_dir, free_port()), gone_pids={server.pid}, deadline=deadline,
                             clock=clock, probe_factory=lambda: gpu)  # fmt: skip
    assert server.poll() is not None  # released once the server had gone, not before
    server.wait()
    assert released.gpus == "GPU 0: free 32.00/32.00 GiB, needed 16.00 GiB" and "free" in released.port


def test_without_nvml_or_a_gpu_only_the_port_is_checked(profiles_dir: Path) -> None:
    clock = FakeClock()
    no_nvml = FakeGpuProbe(reason="no NVML: libnvidia-ml.so.1 not found")
    released = wait_released(plan(profiles_dir, free_port()), gone_pids=(), deadline=clock.now, clock=clock,
                             probe_factory=lambda: no_nvml)  # fmt: skip
    assert released.gpus == "GPU memory not checked (no NVML: libnvidia-ml.so.1 not found)"
    sim = wait_released(plan(profiles_dir, free_port(), "vllm-sim"), gone_pids=(), deadline=clock.now,
                        clock=clock, probe_factory=FakeGpuProbe)  # fmt: skip
    assert sim.gpus.startswith("GPU memory not checked: the simulator without --sim-gpu-allocate")


def test_a_long_wait_says_what_is_still_held_every_few_seconds(profiles_dir: Path) -> None:
    clock = FakeClock()
    said: list[str] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(NotReleased):
            wait_released(plan(profiles_dir, port), gone_pids=(), deadline=clock.now + 12, clock=clock,
                          probe_factory=FakeGpuProbe, on_wait=said.append)  # fmt: skip
    assert len(said) == 2  # at 5 s and 10 s of a 12 s wait, not at every 0.1 s poll
    assert (
        said[0].startswith("waiting 5 s for the stopped server to let go: ")
        and f":{port} is in use by pid {os.getpid()}" in said[0]
    )


def test_an_arm_on_another_port_is_told_free_on_the_port_it_will_use(profiles_dir: Path) -> None:
    """Production asleep (park = "sleep") keeps its own port; the arm listens on another one, and the
    release must name the port it checked, not the sleeper's, which is still held."""
    clock = FakeClock()
    arm_port = free_port()
    with socket.socket() as sleeper:
        sleeper.bind(("127.0.0.1", 0))
        sleeper.listen()
        held = sleeper.getsockname()[1]
        released = wait_released(plan(profiles_dir, held), gone_pids=(), deadline=clock.now, clock=clock,
                                 probe_factory=FakeGpuProbe, port=arm_port)  # fmt: skip
    assert released.port == f"port {arm_port} free"
    assert f"released after 0.0 s: port {arm_port} free; GPU 0:" in released.describe()


class DrainingGpu(FakeGpuProbe):
    """One 32 GiB GPU whose free memory comes back `after_s` into the wait, read on the fake clock."""

    def __init__(self, clock: FakeClock, after_s: float, free_mib: int) -> None:
        super().__init__(total_mib=(32768,), free_mib=[free_mib])
        self.clock, self.back_at, self.looks = clock, clock.now + after_s, 0

    def devices(self) -> list[GpuDevice]:
        self.looks += 1
        if self.clock.now >= self.back_at:
            self.free_mib = [32768]
        return super().devices()


def test_the_wait_ends_at_the_first_poll_that_sees_the_memory_back(profiles_dir: Path) -> None:
    clock = FakeClock()
    gpu = DrainingGpu(clock, after_s=2.35, free_mib=1000)
    released = wait_released(plan(profiles_dir, free_port()), gone_pids=(), deadline=clock.now + 60, clock=clock,
                             probe_factory=lambda: gpu)  # fmt: skip
    # polls every 0.1 s: the memory is back at 2.35 s, first seen by the poll at 2.4 s
    assert released.seconds == pytest.approx(2.4) and clock.slept == [pytest.approx(POLL_S)] * 24
    assert gpu.looks == 25 and released.gpus == "GPU 0: free 32.00/32.00 GiB, needed 16.00 GiB"


@pytest.mark.parametrize(("free_mib", "ok"), [(16384, True), (16383, False)])
def test_free_memory_must_reach_utilization_times_total(profiles_dir: Path, free_mib: int, ok: bool) -> None:
    """vLLM's own rule (vllm-facts.md §5.2): 0.5 x 32 GiB needs 16 GiB free, and one MiB less fails."""
    clock = FakeClock()
    gpu = FakeGpuProbe(total_mib=(32768,), free_mib=[free_mib])
    wait = partial(wait_released, plan(profiles_dir, free_port()), gone_pids=(), deadline=clock.now, clock=clock,
                   probe_factory=lambda: gpu)  # fmt: skip
    if ok:
        assert wait().gpus.startswith("GPU 0: free 16.00/32.00 GiB")
        return
    with pytest.raises(NotReleased, match=r"GPU 0: free 16\.00/32\.00 GiB, needed 16\.00 GiB"):
        wait()


def test_a_gone_pid_still_listed_blocks_even_with_memory_free(profiles_dir: Path) -> None:
    clock = FakeClock()
    gpu = FakeGpuProbe(total_mib=(32768,))
    gpu.hold(0, os.getpid(), None)  # listed, its usage not reported (some containers, MIG)
    with pytest.raises(NotReleased, match=rf"still listed: pid {os.getpid()}"):
        wait_released(plan(profiles_dir, free_port()), gone_pids={os.getpid()}, deadline=clock.now + 0.3,
                      clock=clock, probe_factory=lambda: gpu)  # fmt: skip
    released = wait_released(plan(profiles_dir, free_port()), gone_pids=(), deadline=clock.now, clock=clock,
                             probe_factory=lambda: gpu)  # fmt: skip
    assert released.gpus.startswith("GPU 0: free 32.00/32.00 GiB")  # a process we did not stop is not ours


def test_a_gpu_the_profile_names_but_the_host_lacks_is_never_released(profiles_dir: Path) -> None:
    clock = FakeClock()
    plan(profiles_dir, free_port())  # writes p.toml with CUDA_VISIBLE_DEVICES = "0"
    (profiles_dir / "p.toml").write_text((profiles_dir / "p.toml").read_text().replace('"0"', '"1"'))
    second_gpu = build_plan(profiles_dir, "p")
    assert second_gpu.env["CUDA_VISIBLE_DEVICES"] == "1"
    with pytest.raises(NotReleased, match="GPU 1 not found"):  # FakeGpuProbe has GPU 0 only
        wait_released(second_gpu, gone_pids=(), deadline=clock.now, clock=clock, probe_factory=FakeGpuProbe)


def test_a_deadline_already_past_looks_once_and_sleeps_not_at_all(profiles_dir: Path) -> None:
    clock = FakeClock()
    gpu = FakeGpuProbe(total_mib=(32768,), free_mib=[100])
    with pytest.raises(NotReleased, match="did not let go within 0 s"):
        wait_released(plan(profiles_dir, free_port()), gone_pids=(), deadline=clock.now - 5, clock=clock,
                      probe_factory=lambda: gpu)  # fmt: skip
    assert clock.slept == []
