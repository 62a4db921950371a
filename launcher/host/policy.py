"""A profile's `[preflight]` table with its defaults filled in, and the GPUs its server will use."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from basis.setting import SettingValues
from basis.simgpus import ENV as SIM_GPU_SET_ENV
from launcher.errors import BadInput
from launcher.host.request import HostRequest
from launcher.profile.keys import PREFLIGHT

# vLLM 0.33's default --gpu-memory-utilization (vllm-facts.md §9; older releases: 0.9).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
SIM_PROGRAM = "vllm-sim"
SIM_GPU_FLAG = "--sim-gpu-allocate"
SIM_GPU_SET_FLAG = "--sim-gpu-set"


@dataclass(frozen=True, slots=True)
class HostPolicy:
    reap_orphans: bool
    reap_grace_s: float
    reap_deadline_s: float
    min_host_available_gib: float
    max_swap_used_gib: float | None
    restart_max_failures: int
    restart_window_s: float
    cuda_context_mib: float

    @classmethod
    def from_request(cls, request: HostRequest) -> HostPolicy:
        declared = SettingValues.of(PREFLIGHT, request.preflight)
        values = {s.name: declared.value(s.name) for s in PREFLIGHT}
        for name in (
            "reap_grace_s",
            "reap_deadline_s",
            "min_host_available_gib",
            "max_swap_used_gib",
            "restart_window_s",
            "cuda_context_mib",
        ):
            if values[name] is not None and values[name] < 0:
                raise BadInput(
                    f"profile {request.profile!r}: preflight.{name} = {values[name]} must not be negative"
                )
        if values["restart_max_failures"] < 1:
            raise BadInput(f"profile {request.profile!r}: preflight.restart_max_failures must be at least 1")
        return cls(**values)


@dataclass(frozen=True, slots=True)
class GpuDemand:
    """Which GPUs the server will use and how much of each vLLM will demand at start."""

    ids: tuple[str, ...]  # CUDA_VISIBLE_DEVICES entries, first `world_size` of them
    source: str
    utilization: float
    no_gpu_reason: str | None = None  # set when this server uses no GPU at all
    problem: str | None = None  # a plan that cannot work (fewer GPUs visible than TP×PP needs)
    kv_cache_bytes_set: bool = False

    @property
    def uses_gpu(self) -> bool:
        return self.no_gpu_reason is None


def gpu_demand(request: HostRequest, environ: Mapping[str, str] | None = None) -> GpuDemand:
    """CUDA_VISIBLE_DEVICES from the profile's env, else from the launcher's, else 0..TP×PP×DP-1."""
    environ = os.environ if environ is None else environ
    args = {str(k).replace("-", "_"): v for k, v in request.args.items()}
    utilization = float(args.get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION))
    kv_bytes = args.get("kv_cache_memory_bytes") is not None
    world = _world_size(args)
    program = PurePath(request.argv[0]).name if request.argv else ""
    if program == SIM_PROGRAM and SIM_GPU_FLAG not in request.argv and not sim_gpu_set_of(request, environ):
        why = f"the simulator without {SIM_GPU_FLAG} uses no GPU (no simulated GPU set: {SIM_GPU_SET_ENV})"
        return GpuDemand((), "", utilization, no_gpu_reason=why)
    given = _visible_devices(request.env, environ)
    if given is None:
        ids = tuple(str(i) for i in range(world))
        source = f"the default for tensor × pipeline × data parallel = {world}"
        return GpuDemand(ids, source, utilization, kv_cache_bytes_set=kv_bytes)
    return _named_gpus(*given, world, utilization, kv_bytes)


def sim_gpu_set_of(request: HostRequest, environ: Mapping[str, str] | None = None) -> str | None:
    """The simulated GPU set a `vllm-sim` start holds its memory on: its `--sim-gpu-set`, else
    `VLLM_SIM_GPU_SET` in the profile's [env], else in the launcher's environment (the simulator
    reads the same, in that order); None for any other program, or without one."""
    if not request.argv or PurePath(request.argv[0]).name != SIM_PROGRAM:
        return None
    environ = os.environ if environ is None else environ
    argv = list(request.argv)
    for i, token in enumerate(argv):
        if token == SIM_GPU_SET_FLAG and i + 1 < len(argv):
            return argv[i + 1] or None
        if token.startswith(SIM_GPU_SET_FLAG + "="):
            return token.split("=", 1)[1] or None
    return request.env.get(SIM_GPU_SET_ENV) or environ.get(SIM_GPU_SET_ENV) or None


def _named_gpus(visible: str, source: str, world: int, utilization: float, kv_bytes: bool) -> GpuDemand:
    """The first `world` GPUs that CUDA_VISIBLE_DEVICES names: none where it hides them all (empty,
    or -1), and a problem where it names fewer than the engine needs."""
    tokens = tuple(t.strip() for t in visible.split(",") if t.strip())
    if not tokens or tokens[0] == "-1":
        return GpuDemand(
            (), source, utilization, no_gpu_reason=f"{source} is {visible!r}: no GPU visible to vLLM"
        )
    problem = None
    if len(tokens) < world:
        needs = f"the profile needs {world} (tensor × pipeline × data parallel)"
        problem = f"{source} names {len(tokens)} GPU(s) ({visible}) but {needs}"
    return GpuDemand(tokens[:world], source, utilization, problem=problem, kv_cache_bytes_set=kv_bytes)


def _world_size(args: Mapping[str, Any]) -> int:
    """GPUs the engine needs: tensor × pipeline × data parallel (the local part of the data parallel)."""
    data = "data_parallel_size_local" if "data_parallel_size_local" in args else "data_parallel_size"
    return _size(args, "tensor_parallel_size") * _size(args, "pipeline_parallel_size") * _size(args, data)


def _visible_devices(profile_env: Mapping[str, str], environ: Mapping[str, str]) -> tuple[str, str] | None:
    """CUDA_VISIBLE_DEVICES and where it came from: the profile's [env], else the launcher's own."""
    if "CUDA_VISIBLE_DEVICES" in profile_env:
        return profile_env["CUDA_VISIBLE_DEVICES"], "CUDA_VISIBLE_DEVICES in the profile's [env]"
    if "CUDA_VISIBLE_DEVICES" in environ:
        return environ["CUDA_VISIBLE_DEVICES"], "CUDA_VISIBLE_DEVICES of the launcher's environment"
    return None


def _size(args: Mapping[str, Any], name: str) -> int:
    value = args.get(name, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1
