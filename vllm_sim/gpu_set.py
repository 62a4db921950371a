"""`--sim-gpu-set DIR`: the engine's GPU memory held on a simulated GPU set (basis/simgpus.py).

Each rank's process (the engine core with TP 1, each worker with TP > 1) holds util × (total −
reserved) on its device of the set, as vLLM's would on a card, so the launcher reads who holds
what, and how much is free, as it reads NVML. Rank r's device is CUDA_VISIBLE_DEVICES's r-th entry
(an index or a uuid of the set; default r). vLLM's free-memory check at device init reads the set
(`free_gib`); sleep drops the hold to the residue and wake takes it back, or fails as a CUDA OOM
in vLLM's wake does (vllm-facts.md §16) when the set has no room. basis.simgpus is imported only
when a set is used: the engine core imports no psutil otherwise (tests/unit/test_sim_start_imports.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from vllm_sim.ballast import GpuHold, GpuMemory
from vllm_sim.lifecycle import on_leave, title

if TYPE_CHECKING:
    from basis.simgpus import SimGpuSet

# What `CUDA_CHECK` in vLLM's csrc/cumem_allocator.cpp says when cuMemCreate finds no room; the path
# is the build's `__FILE__` (vllm-facts.md §16): a reader matches the text, not the place.
WAKE_OOM = "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:111"
GIB_MIB = 1024


class GpuSetRefused(Exception):
    """The set cannot be used as given: the message names the set and what is wrong."""


def gpu_memory(directory: str | None, devices: tuple[int, ...]) -> GpuMemory:
    """What holds this rank's GPU memory: the simulated set `directory` when given, else a real card."""
    return SetHold(directory, devices) if directory else GpuHold()


def _open(directory: str) -> SimGpuSet:
    from basis.simgpus import SimGpuSet

    return SimGpuSet(directory)


def rank_devices(directory: str, visible: str | None, tp: int) -> tuple[tuple[int, ...], float]:
    """The set's device index of each rank, and rank 0's total as CUDA reports it (GiB)."""
    from basis.simgpus import SimGpuError

    try:
        devices = _open(directory).devices()
    except SimGpuError as err:
        raise GpuSetRefused(f"--sim-gpu-set {directory}: {err}") from None
    tokens = [t.strip() for t in visible.split(",") if t.strip()] if visible else [str(r) for r in range(tp)]
    by_token = {str(d.index): d.index for d in devices} | {d.uuid: d.index for d in devices}
    chosen = [by_token.get(token) for token in tokens[:tp]]
    if len(chosen) < tp or None in chosen:
        raise GpuSetRefused(
            f"--sim-gpu-set {directory}: CUDA_VISIBLE_DEVICES={visible!r} does not name {tp} of its "
            f"{len(devices)} device(s)"
        )
    indexes = tuple(i for i in chosen if i is not None)
    return indexes, devices[indexes[0]].usable_mib / GIB_MIB


def free_gib(directory: str, index: int) -> tuple[float, float]:
    """(free, total) of device `index` as torch.cuda.mem_get_info would report them, in GiB."""
    gpus = _open(directory)
    return gpus.free_mib(index) / GIB_MIB, gpus.device(index).usable_mib / GIB_MIB


class SetHold:
    """`GpuHold`'s sibling on a simulated set: `allocate`, `loaded`, `resize`, released on the way out."""

    def __init__(self, directory: str, devices: tuple[int, ...]) -> None:
        self.directory = directory
        self.devices = devices
        self._index: int | None = None
        self._full_mib = 0
        self._mib = 0

    def allocate(self, util: float, device: int) -> str | None:
        """Hold util × (total − reserved) on rank `device`'s device of the set, state "loading"."""
        self._index = self.devices[device]
        gpus = _open(self.directory)
        self._full_mib = int(util * gpus.device(self._index).usable_mib)
        self._put(self._full_mib, "loading", "load_begin")
        on_leave(self.release)
        return None

    def loaded(self) -> None:
        """The engine is ready: its memory is what it will hold while it serves."""
        if self._index is not None:
            self._put(self._mib, "loaded", "load_end")

    def resize(self, gib: float | None) -> str | None:
        """Sleep: hold `gib` (the residue); None: all of it again. A wake that finds no room holds
        nothing more and returns CUDA's words for it."""
        if self._index is None:
            return None
        want = self._full_mib if gib is None else min(self._full_mib, round(gib * GIB_MIB))
        growing = want > self._mib
        if growing and want - self._mib > _open(self.directory).free_mib(self._index):
            return WAKE_OOM
        self._put(want, "loaded" if gib is None else "asleep", "wake" if growing else "sleep")
        return None

    def release(self) -> None:
        """The process ends: the driver frees its memory."""
        if self._index is None:
            return
        gpus = _open(self.directory)
        gpus.release(os.getpid())
        gpus.event(os.getpid(), {self._index: self._mib}, "exit")
        self._index = None

    def _put(self, mib: int, state: str, event: str) -> None:
        assert self._index is not None
        gpus = _open(self.directory)
        gpus.hold(os.getpid(), {self._index: mib}, state, title())
        gpus.event(os.getpid(), {self._index: mib}, event)
        self._mib = mib
