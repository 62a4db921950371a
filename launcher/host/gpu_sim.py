"""The simulated GPU set (basis/simgpus.py) read as a `GpuProbe`, and `gpu_probe`: which probe runs.

With `VLLM_SIM_GPU_SET` set, every GPU reading of the launcher (preflight, the release wait, the
reaper, the engine's memory) reads the set the simulator writes, so trials beside production, GPU
locks and power limits run for real on a host without a GPU. Without it, NVML. One variable names
the set for both sides: the simulator holds its memory there (`--sim-gpu-set`, which also reads it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from basis.simgpus import ENV, PowerNotPermitted, PowerOutOfRange, SimDevice, SimGpuError, SimGpuSet
from launcher.host.gpu import MIB, GpuDevice, GpuProbe, GpuProcess, NvmlProbe, PowerLimit


class SimGpuProbe:
    """The set in `directory` as NVML would show it: devices, the pids of live holders, power."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._set = SimGpuSet(self.directory)
        self._reason: str | None = "the simulated GPU set is not read yet"

    def __enter__(self) -> Self:
        try:
            self._set.devices()
        except SimGpuError as err:
            self._reason = f"the simulated GPU set at {self.directory} cannot be read: {err}"
        else:
            self._reason = None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def skip_reason(self) -> str | None:
        return self._reason

    def devices(self) -> list[GpuDevice]:
        held = self._set.held()
        return [_device(d, sum(held.get(d.index, {}).values())) for d in self._set.devices()]

    def processes(self, index: int) -> list[GpuProcess]:
        pids = self._set.held().get(index, {})
        return [GpuProcess(pid, mib * MIB) for pid, mib in sorted(pids.items())]

    def power_limit(self, index: int) -> PowerLimit | None:
        try:
            device = self._set.device(index)
            current = self._set.power_limit_w(index)
        except SimGpuError:
            return None
        power = device.power
        return PowerLimit(current, power.default_w, power.min_w, power.max_w)

    def set_power_limit(self, index: int, watts: float) -> str | None:
        try:
            self._set.set_power_limit_w(index, watts)
        except PowerNotPermitted as err:
            return f"NVML refused: {err}"
        except PowerOutOfRange as err:
            return str(err)
        except SimGpuError as err:
            return f"the simulated GPU set refused: {err}"
        return None


def _device(device: SimDevice, held_mib: int) -> GpuDevice:
    """NVML v2's figures: `used` leaves the reserved part out; `free` is what CUDA reports."""
    return GpuDevice(
        index=device.index,
        uuid=device.uuid,
        name=device.name,
        total_bytes=device.total_mib * MIB,
        used_bytes=held_mib * MIB,
        free_bytes=max(0, device.usable_mib - held_mib) * MIB,
        reserved_bytes=device.reserved_mib * MIB,
    )


def sim_gpu_set(environ: Mapping[str, str] | None = None) -> str | None:
    """The simulated set's directory when `VLLM_SIM_GPU_SET` names one, else None."""
    value = (os.environ if environ is None else environ).get(ENV, "")
    return value or None


def gpu_probe(environ: Mapping[str, str] | None = None) -> GpuProbe:
    """The simulated set when `VLLM_SIM_GPU_SET` is set (not empty), else NVML."""
    directory = sim_gpu_set(environ)
    return SimGpuProbe(directory) if directory else NvmlProbe()
