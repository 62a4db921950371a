"""Real resident memory the engine holds: a leak that never stops, a warm-up that plateaus, and
host-memory pressure that fills RAM up to a ceiling.

Pages are written (not just reserved) so the growth shows in RSS, where a memory gate looks, and in
the host's available memory. Each tick allocates at most `TICK_CAP_MIB`, so the engine's busy loop
keeps answering its steps while memory grows.
"""

from __future__ import annotations

import math
from typing import Protocol

MIB = 1024 * 1024
TICK_CAP_MIB = 32


class Ballast:
    """Grows RSS towards `target_mib(now)`: a leak from ready on, a warm-up from the first request on."""

    def __init__(self, leak_mib_per_min: float, warmup_mib: float, warmup_s: float) -> None:
        self.leak_mib_per_min = leak_mib_per_min
        self.warmup_mib = warmup_mib
        self.warmup_s = max(warmup_s, 0.001)
        self._leak_from: float | None = None
        self._warm_from: float | None = None
        self._chunks: list[bytes] = []
        self.pressure_mib = 0
        self.pressure_s = 60.0

    @property
    def grows(self) -> bool:
        """Whether anything here grows with time (then the engine ticks it often)."""
        return self.leak_mib_per_min > 0 or self.warmup_mib > 0 or self.pressure_mib > 0

    @property
    def held_mib(self) -> int:
        return len(self._chunks)

    def add_pressure(self, mib: int, seconds: float) -> None:
        """`--sim-host-pressure-mib`: grow linearly to `mib` over `seconds` from ready on, then hold."""
        self.pressure_mib, self.pressure_s = mib, max(seconds, 0.001)

    def start_leak(self, now: float) -> None:
        """The leak (and the host pressure) run from the moment the engine is ready."""
        self._leak_from = now

    def start_warmup(self, now: float) -> None:
        """The allocator warms up when traffic starts (the first request)."""
        if self._warm_from is None:
            self._warm_from = now

    def target_mib(self, now: float) -> float:
        """Leak: linear forever. Warm-up: W x (1 - e^(-3t/T)) (95% by T), exactly W from T on."""
        leak = warm = pressure = 0.0
        if self._leak_from is not None:
            since = max(0.0, now - self._leak_from)
            leak = self.leak_mib_per_min * since / 60.0
            pressure = self.pressure_mib * min(1.0, since / self.pressure_s)
        if self._warm_from is not None and self.warmup_mib > 0:
            t = max(0.0, now - self._warm_from)
            warm = self.warmup_mib
            if t < self.warmup_s:
                warm *= 1 - math.exp(-3 * t / self.warmup_s)
        return leak + warm + pressure

    def tick(self, now: float) -> None:
        want = min(int(self.target_mib(now)), len(self._chunks) + TICK_CAP_MIB)
        while len(self._chunks) < want:
            self._chunks.append(b"\x5a" * MIB)


class GpuMemory(Protocol):
    """What stands for a rank's GPU memory: a real card's (`GpuHold`) or a simulated set's
    (`gpu_set.SetHold`); the rest of the simulator does not care which."""

    def allocate(self, util: float, device: int) -> str | None: ...

    def loaded(self) -> None: ...

    def resize(self, gib: float | None) -> str | None: ...


class GpuHold:
    """`--sim-gpu-allocate`: hold util x total of a real GPU so NVML sees it (torch imported lazily)."""

    def __init__(self) -> None:
        self._tensor: object | None = None
        self.held_bytes = 0
        self._device = 0

    def allocate(self, util: float, device: int) -> str | None:
        """Allocate on cuda:device; returns why nothing was held, or None on success."""
        try:
            import torch  # noqa: PLC0415 - optional, heavy: only when asked
        except ImportError:
            return "torch is not installed"
        if not torch.cuda.is_available() or device >= torch.cuda.device_count():
            return f"no CUDA device cuda:{device}"
        free, total = torch.cuda.mem_get_info(device)
        want = int(min(util * total - (total - free), free - 256 * MIB))
        if want <= 0:
            return f"not enough free memory on cuda:{device}"
        self._tensor = torch.empty(want, dtype=torch.uint8, device=f"cuda:{device}")
        self.held_bytes = want
        self._device = device
        return None

    def loaded(self) -> None:
        return None  # a real card shows nothing more when the engine is ready

    def resize(self, gib: float | None) -> str | None:
        """Sleep mode: keep `gib` of what was allocated (None: all of it again), so NVML sees the
        residue of a sleeping engine. Nothing happens when nothing was held."""
        if not self.held_bytes:
            return None
        import torch  # noqa: PLC0415 - present: allocate() succeeded

        keep = self.held_bytes if gib is None else min(self.held_bytes, int(gib * 1024**3))
        self._tensor = None
        torch.cuda.empty_cache()
        self._tensor = torch.empty(keep, dtype=torch.uint8, device=f"cuda:{self._device}")
        return None
