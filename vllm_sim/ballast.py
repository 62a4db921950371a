"""Real resident memory the engine holds: a leak that never stops, or a warm-up that plateaus.

Pages are written (not just reserved) so the growth shows in RSS, where a memory gate looks.
"""

from __future__ import annotations

import math

MIB = 1024 * 1024


class Ballast:
    """Grows RSS towards `target_mib(now)`: a leak from ready on, a warm-up from the first request on."""

    def __init__(self, leak_mib_per_min: float, warmup_mib: float, warmup_s: float) -> None:
        self.leak_mib_per_min = leak_mib_per_min
        self.warmup_mib = warmup_mib
        self.warmup_s = max(warmup_s, 0.001)
        self._leak_from: float | None = None
        self._warm_from: float | None = None
        self._chunks: list[bytes] = []

    @property
    def held_mib(self) -> int:
        return len(self._chunks)

    def start_leak(self, now: float) -> None:
        """The leak runs from the moment the engine is ready."""
        self._leak_from = now

    def start_warmup(self, now: float) -> None:
        """The allocator warms up when traffic starts (the first request)."""
        if self._warm_from is None:
            self._warm_from = now

    def target_mib(self, now: float) -> float:
        """Leak: linear forever. Warm-up: W x (1 - e^(-3t/T)) (95% by T), exactly W from T on."""
        leak = warm = 0.0
        if self._leak_from is not None:
            leak = self.leak_mib_per_min * max(0.0, now - self._leak_from) / 60.0
        if self._warm_from is not None and self.warmup_mib > 0:
            t = max(0.0, now - self._warm_from)
            warm = self.warmup_mib
            if t < self.warmup_s:
                warm *= 1 - math.exp(-3 * t / self.warmup_s)
        return leak + warm

    def tick(self, now: float) -> None:
        want = int(self.target_mib(now))
        while len(self._chunks) < want:
            self._chunks.append(b"\x5a" * MIB)


class GpuHold:
    """`--sim-gpu-allocate`: hold util x total of a real GPU so NVML sees it (torch imported lazily)."""

    def __init__(self) -> None:
        self._tensor: object | None = None
        self.held_bytes = 0

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
        return None
