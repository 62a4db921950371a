"""The one seam to the GPUs: which exist, how full they are, which pids hold what, their power limits.

`NvmlProbe` reads NVML (nvidia-ml-py's `pynvml`); without a driver or library it reports a skip
reason instead of raising, so every GPU check can say "skipped: no NVML". `FakeGpuProbe` is the
test double: the test sets devices and maps real pids of real processes to memory. The simulated
GPU set (`gpu_sim.SimGpuProbe`) is the third reading, chosen by `gpu_sim.gpu_probe`. Nothing else
in the launcher is faked.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Protocol, Self

import psutil

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int  # NVML index (PCI bus order; set CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA agrees)
    uuid: str
    name: str
    total_bytes: int
    used_bytes: int
    free_bytes: int
    reserved_bytes: int = 0  # NVML v2: driver-reserved, never usable; CUDA's total leaves it out

    @property
    def cuda_total_bytes(self) -> int:
        """The total vLLM sees (torch.cuda.mem_get_info) and multiplies by gpu_memory_utilization:
        NVML's total less the reserved part (143,771 − 615 = 143,155 MiB on an H200, measured)."""
        return self.total_bytes - self.reserved_bytes


@dataclass(frozen=True, slots=True)
class PowerLimit:
    """A GPU's power limit and the range NVML lets it be set in, in watts."""

    current_w: float
    default_w: float
    min_w: float
    max_w: float

    def refusal(self, watts: float) -> str | None:
        """Why `watts` cannot be set on this GPU, in the words the probes share; None when it can."""
        if not math.isfinite(watts) or not self.min_w <= watts <= self.max_w:
            return f"{watts:g} W is outside {self.min_w:g}–{self.max_w:g} W"
        return None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_bytes: int | None  # None where the driver does not say (some containers, MIG)


class GpuProbe(Protocol):
    """What the host checks need from NVML. Used as a context manager: `with probe: ...`."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def skip_reason(self) -> str | None:
        """None when GPUs can be read; else why not ("no NVML: ...")."""
        ...

    def devices(self) -> Sequence[GpuDevice]: ...

    def processes(self, index: int) -> Sequence[GpuProcess]: ...

    def power_limit(self, index: int) -> PowerLimit | None:
        """The GPU's power limit and its range; None where the GPU does not report one."""
        ...

    def set_power_limit(self, index: int, watts: float) -> str | None:
        """Set the limit: None when done, else why not in NVML's words ("NVML refused: Insufficient
        Permissions", "not supported on this GPU", "450 W is outside 100–700 W")."""
        ...


NOT_SUPPORTED = "not supported on this GPU"


def resolve_device(token: str, devices: Sequence[GpuDevice]) -> GpuDevice | None:
    """A CUDA_VISIBLE_DEVICES entry (an index or a UUID prefix, as CUDA accepts) to its device."""
    if token.isdigit():
        return next((d for d in devices if d.index == int(token)), None)
    if token.startswith("GPU-"):
        matches = [d for d in devices if d.uuid.startswith(token)]
        return matches[0] if len(matches) == 1 else None
    return None


class NvmlProbe:
    """The real probe. NVML is initialised in `__enter__`, never in the constructor. `nvml` stands in
    for the `pynvml` module (a test's hand-written one); None imports the real one."""

    def __init__(self, nvml: Any = None) -> None:
        self._module = nvml
        self._nvml: Any = None
        self._reason: str | None = "NVML not started"

    def __enter__(self) -> Self:
        try:
            pynvml = self._module if self._module is not None else importlib.import_module("pynvml")
            pynvml.nvmlInit()
        except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, ImportError...
            self._reason = f"no NVML: {err}"
            return self
        self._nvml = pynvml
        self._reason = None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            finally:
                self._nvml = None
                self._reason = "NVML closed"

    def skip_reason(self) -> str | None:
        return self._reason

    def devices(self) -> list[GpuDevice]:
        nvml = self._require()
        found = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = self._memory(handle)
            found.append(
                GpuDevice(
                    index=index,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    total_bytes=int(memory.total),
                    used_bytes=int(memory.used),
                    free_bytes=int(memory.free),
                    reserved_bytes=int(getattr(memory, "reserved", 0) or 0),
                )
            )
        return found

    def processes(self, index: int) -> list[GpuProcess]:
        nvml = self._require()
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        held: dict[int, int | None] = {}
        for query in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
            try:
                entries = query(handle)
            except nvml.NVMLError:
                continue
            for entry in entries:
                used = entry.usedGpuMemory
                used = None if used is None or used < 0 or used >= 2**63 else int(used)
                previous = held.get(int(entry.pid))
                held[int(entry.pid)] = used if previous is None else previous + (used or 0)
        return [GpuProcess(pid, used) for pid, used in sorted(held.items())]

    def power_limit(self, index: int) -> PowerLimit | None:
        """nvmlDeviceGetPowerManagementLimit, ...LimitConstraints and ...DefaultLimit (milliwatts)."""
        nvml = self._require()
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            current = nvml.nvmlDeviceGetPowerManagementLimit(handle)
            low, high = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
            default = nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle)
        except nvml.NVMLError:
            return None
        return PowerLimit(current / 1000, default / 1000, low / 1000, high / 1000)

    def set_power_limit(self, index: int, watts: float) -> str | None:
        """nvmlDeviceSetPowerManagementLimit, after the range check NVML would answer "Invalid
        Argument" to; needs root (else "Insufficient Permissions")."""
        nvml = self._require()
        limit = self.power_limit(index)
        if limit is None:
            return NOT_SUPPORTED
        refusal = limit.refusal(watts)
        if refusal is not None:
            return refusal
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            nvml.nvmlDeviceSetPowerManagementLimit(handle, round(watts * 1000))
        except nvml.NVMLError as err:
            if getattr(err, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                return NOT_SUPPORTED
            return f"NVML refused: {err}"
        return None

    def _memory(self, handle: Any) -> Any:
        # v2 leaves driver-reserved memory out of `used`, as cudaMemGetInfo (what vLLM reads) does.
        try:
            return self._nvml.nvmlDeviceGetMemoryInfo(handle, version=self._nvml.nvmlMemory_v2)
        except (self._nvml.NVMLError, TypeError, AttributeError):
            return self._nvml.nvmlDeviceGetMemoryInfo(handle)

    def _require(self) -> Any:
        if self._nvml is None:
            raise RuntimeError(f"NvmlProbe used outside `with` or without NVML ({self._reason})")
        return self._nvml


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class FakeGpuProbe:
    """A hand-set GPU view for CPU tests: devices by total/free MiB, pids by held MiB.

    `free_mib` is what the device reports as free, independent of `held`, as on a real card where
    memory can be held by processes the probe cannot see. A pid that ends drops out, freeing its memory.
    """

    total_mib: Sequence[int] = (32768,)
    free_mib: list[int] = field(default_factory=list)
    held: dict[int, dict[int, int | None]] = field(default_factory=dict)  # index -> pid -> MiB
    reason: str | None = None
    entered: int = 0
    power: dict[int, PowerLimit] = field(default_factory=dict)  # index -> limit; absent: not reported
    power_refusal: str | None = None  # what every set answers, e.g. "NVML refused: Insufficient Permissions"
    power_sets: list[tuple[int, float]] = field(default_factory=list)  # each set asked for, in order

    def __post_init__(self) -> None:
        if not self.free_mib:
            self.free_mib = list(self.total_mib)

    def __enter__(self) -> Self:
        self.entered += 1
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def hold(self, index: int, pid: int, mib: int | None) -> None:
        """Say that real process `pid` holds `mib` on GPU `index`, and take it from the free memory."""
        self.held.setdefault(index, {})[pid] = mib
        self.free_mib[index] -= mib or 0

    def _prune(self) -> None:
        """A process that ended gives its memory back, as the driver does (zombies hold none)."""
        for index, pids in self.held.items():
            for pid in [p for p in pids if not _running(p)]:
                self.free_mib[index] += pids.pop(pid) or 0

    def skip_reason(self) -> str | None:
        return self.reason

    def devices(self) -> list[GpuDevice]:
        self._prune()
        return [
            GpuDevice(
                index=i,
                uuid=f"GPU-fake-{i:04d}",
                name="Fake GPU",
                total_bytes=total * MIB,
                used_bytes=(total - self.free_mib[i]) * MIB,
                free_bytes=self.free_mib[i] * MIB,
            )
            for i, total in enumerate(self.total_mib)
        ]

    def processes(self, index: int) -> list[GpuProcess]:
        self._prune()
        pids: Mapping[int, int | None] = self.held.get(index, {})
        return [GpuProcess(pid, None if mib is None else mib * MIB) for pid, mib in sorted(pids.items())]

    def power_limit(self, index: int) -> PowerLimit | None:
        return self.power.get(index)

    def set_power_limit(self, index: int, watts: float) -> str | None:
        """Recorded; refused as set in `power_refusal`, or as NVML would (unreported, out of range)."""
        self.power_sets.append((index, watts))
        limit = self.power.get(index)
        if limit is None:
            return NOT_SUPPORTED
        refusal = self.power_refusal or limit.refusal(watts)
        if refusal is None:
            self.power[index] = replace(limit, current_w=float(watts))
        return refusal


def _running(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
