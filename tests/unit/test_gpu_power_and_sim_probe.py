"""The GPU seam's power limits and the simulated GPU set as a probe (launcher/host/gpu.py, gpu_sim.py).

`NvmlProbe` is driven through a small hand-written stand-in for the `pynvml` module (the probe takes
the module it reads), with NVML's own error values and words; `SimGpuProbe` reads a real set that
real processes hold memory on; `gpu_probe` picks by `VLLM_SIM_GPU_SET`; `gpu_demand` counts a
simulator on a set as a GPU user.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from basis import simgpus
from launcher.host.gpu import MIB, FakeGpuProbe, NvmlProbe, PowerLimit
from launcher.host.gpu_sim import SimGpuProbe, gpu_probe
from launcher.host.policy import gpu_demand, sim_gpu_set_of
from launcher.host.request import HostRequest

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4


class NVMLError(Exception):
    """As pynvml's: a value, and str() NVML's words for it."""

    WORDS = {NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_NO_PERMISSION: "Insufficient Permissions"}

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self.WORDS[self.value]


class StandInNvml:
    """The part of `pynvml` the power paths call, over one GPU whose limits are in milliwatts."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED

    def __init__(self, *, reports: bool = True, set_error: int | None = None) -> None:
        self.reports, self.set_error = reports, set_error
        self.limit_mw = 600_000
        self.sets: list[int] = []
        self.closed = False

    def nvmlInit(self) -> None:
        return None

    def nvmlShutdown(self) -> None:
        self.closed = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        if index != 0:
            raise NVMLError(2)
        return "gpu0"

    def _reported(self, value: Any) -> Any:
        if not self.reports:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    def nvmlDeviceGetPowerManagementLimit(self, handle: str) -> int:
        return int(self._reported(self.limit_mw))

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: str) -> list[int]:
        return list(self._reported([100_000, 700_000]))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: str) -> int:
        return int(self._reported(700_000))

    def nvmlDeviceSetPowerManagementLimit(self, handle: str, limit_mw: int) -> None:
        self.sets.append(limit_mw)
        if self.set_error is not None:
            raise NVMLError(self.set_error)
        self.limit_mw = limit_mw


def test_nvml_power_read_and_set_in_watts() -> None:
    nvml = StandInNvml()
    with NvmlProbe(nvml) as probe:
        assert probe.skip_reason() is None
        assert probe.power_limit(0) == PowerLimit(current_w=600.0, default_w=700.0, min_w=100.0, max_w=700.0)
        assert probe.set_power_limit(0, 450.5) is None
        assert nvml.sets == [450_500]
        assert probe.power_limit(0) == PowerLimit(450.5, 700.0, 100.0, 700.0)
    assert nvml.closed


def test_nvml_power_refusals_in_nvmls_words() -> None:
    with NvmlProbe(StandInNvml(set_error=NVML_ERROR_NO_PERMISSION)) as probe:
        assert probe.set_power_limit(0, 400) == "NVML refused: Insufficient Permissions"
    nvml = StandInNvml()
    with NvmlProbe(nvml) as probe:
        assert probe.set_power_limit(0, 750) == "750 W is outside 100–700 W"
        assert probe.set_power_limit(0, float("nan")) == "nan W is outside 100–700 W"
        assert probe.power_limit(7) is None and probe.set_power_limit(7, 400) == "not supported on this GPU"
    assert nvml.sets == [], "nothing out of range reaches NVML"
    with NvmlProbe(StandInNvml(reports=False)) as probe:
        assert probe.power_limit(0) is None
        assert probe.set_power_limit(0, 400) == "not supported on this GPU"
    with NvmlProbe(StandInNvml(set_error=NVML_ERROR_NOT_SUPPORTED)) as probe:
        assert probe.set_power_limit(0, 400) == "not supported on this GPU"


def test_the_fake_probe_records_power_sets_and_refuses_as_told() -> None:
    fake = FakeGpuProbe(total_mib=(1000,), power={0: PowerLimit(700, 700, 100, 700)})
    assert fake.set_power_limit(0, 300) is None and fake.power_limit(0) == PowerLimit(300, 700, 100, 700)
    assert fake.set_power_limit(0, 50) == "50 W is outside 100–700 W"
    assert fake.set_power_limit(1, 300) == "not supported on this GPU"
    fake.power_refusal = "NVML refused: Insufficient Permissions"
    assert fake.set_power_limit(0, 400) == "NVML refused: Insufficient Permissions"
    assert fake.power_sets == [(0, 300), (0, 50), (1, 300), (0, 400)]
    assert fake.power_limit(0) == PowerLimit(300, 700, 100, 700)


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_the_sim_probe_shows_the_set_as_nvml_would(tmp_path: Path, holder: subprocess.Popen[bytes]) -> None:
    gpus = simgpus.create(tmp_path, 2, 81559, reserved_mib=559)
    gpus.hold(holder.pid, {1: 40000}, "loaded")
    with SimGpuProbe(tmp_path) as probe:
        assert probe.skip_reason() is None
        zero, one = probe.devices()
        assert (zero.total_bytes, zero.used_bytes, zero.free_bytes) == (81559 * MIB, 0, 81000 * MIB)
        assert one.cuda_total_bytes == 81000 * MIB and one.used_bytes == 40000 * MIB
        assert one.free_bytes == 41000 * MIB and one.reserved_bytes == 559 * MIB
        assert [(p.pid, p.used_bytes) for p in probe.processes(1)] == [(holder.pid, 40000 * MIB)]
        assert probe.processes(0) == []
        holder.kill()
        holder.wait()
        assert probe.processes(1) == [] and probe.devices()[1].free_bytes == 81000 * MIB


def test_the_sim_probe_power_paths(tmp_path: Path) -> None:
    simgpus.create(tmp_path / "a", 1, 1000, power_default_w=700, power_min_w=100, power_max_w=700)
    simgpus.create(tmp_path / "b", 1, 1000, settable=False)
    with SimGpuProbe(tmp_path / "a") as probe:
        assert probe.power_limit(0) == PowerLimit(700, 700, 100, 700)
        assert probe.set_power_limit(0, 450) is None
        assert probe.power_limit(0) == PowerLimit(450, 700, 100, 700)
        assert probe.set_power_limit(0, 750) == "750 W is outside 100–700 W"
        assert probe.power_limit(3) is None
    with SimGpuProbe(tmp_path / "b") as probe:
        assert probe.set_power_limit(0, 400) == "NVML refused: Insufficient Permissions"
    assert SimGpuProbe(tmp_path / "a").power_limit(0) == PowerLimit(450, 700, 100, 700), "kept in the set"


def test_an_unreadable_set_is_a_skip_reason_naming_it(tmp_path: Path) -> None:
    with SimGpuProbe(tmp_path / "none") as probe:
        reason = probe.skip_reason()
    assert reason is not None and str(tmp_path / "none") in reason and "devices.json" in reason
    (tmp_path / "devices.json").write_text("{")
    with SimGpuProbe(tmp_path) as probe:
        assert "not JSON" in str(probe.skip_reason())


def test_gpu_probe_reads_the_set_only_when_named(tmp_path: Path) -> None:
    chosen = gpu_probe({"VLLM_SIM_GPU_SET": str(tmp_path)})
    assert isinstance(chosen, SimGpuProbe) and chosen.directory == tmp_path
    assert isinstance(gpu_probe({}), NvmlProbe)
    assert isinstance(gpu_probe({"VLLM_SIM_GPU_SET": ""}), NvmlProbe)


def _sim(argv: tuple[str, ...], env: dict[str, str] | None = None) -> HostRequest:
    return HostRequest(
        profile="p",
        argv=argv,
        env=env or {},
        args={},
        host="127.0.0.1",
        port=8000,
        model="m",
        fingerprint="f",
        has_secret_env=False,
        preflight={},
    )


def test_a_simulator_on_a_set_uses_gpus() -> None:
    sim = ("/venv/bin/vllm-sim", "serve", "m")
    assert not gpu_demand(_sim(sim), {}).uses_gpu
    assert gpu_demand(_sim((*sim, "--sim-gpu-set", "/s")), {}).ids == ("0",)
    assert gpu_demand(_sim((*sim, "--sim-gpu-set=/s")), {}).uses_gpu
    assert gpu_demand(_sim(sim, {"VLLM_SIM_GPU_SET": "/s"}), {}).uses_gpu
    both = gpu_demand(_sim(sim, {"CUDA_VISIBLE_DEVICES": "1"}), {"VLLM_SIM_GPU_SET": "/s"})
    assert both.ids == ("1",)
    assert not gpu_demand(_sim(sim), {"VLLM_SIM_GPU_SET": ""}).uses_gpu
    assert "VLLM_SIM_GPU_SET" in str(gpu_demand(_sim(sim), {}).no_gpu_reason)


def test_which_set_a_simulator_holds_on() -> None:
    sim = ("vllm-sim", "serve", "m")
    launcher = {"VLLM_SIM_GPU_SET": "/launcher"}
    assert (
        sim_gpu_set_of(_sim((*sim, "--sim-gpu-set", "/flag"), {"VLLM_SIM_GPU_SET": "/p"}), launcher)
        == "/flag"
    )
    assert sim_gpu_set_of(_sim(sim, {"VLLM_SIM_GPU_SET": "/profile"}), launcher) == "/profile"
    assert sim_gpu_set_of(_sim(sim), launcher) == "/launcher"
    assert sim_gpu_set_of(_sim(sim), {}) is None
    assert sim_gpu_set_of(_sim(("vllm", "serve", "m")), launcher) is None, "vLLM reads NVML"
    assert os.environ.get("VLLM_SIM_GPU_SET") is None, "the suite runs without a set"
