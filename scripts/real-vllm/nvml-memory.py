"""What NVML and CUDA each say about GPU 0's memory, on the GPU machine.

Preflight reads NVML; vLLM reads torch.cuda.mem_get_info() inside its own process. This prints both,
before and after this process creates its CUDA context, as one JSON line and a MiB summary. On the
H200 (2026-11-29): NVML total 143,771, reserved 615, CUDA total 143,155 (= NVML total - reserved);
the context took 523 MiB of the free memory (docs/host-safety.md, "Counting as vLLM counts").
"""

import json

import pynvml
import torch

MIB = 2**20


def memory(handle: object) -> dict[str, int]:
    info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    return {"total": info.total, "reserved": info.reserved, "free": info.free, "used": info.used}


def main() -> None:
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    before = memory(handle)
    cuda_free, cuda_total = torch.cuda.mem_get_info()  # creates this process's CUDA context
    after = memory(handle)
    processes = [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    print(json.dumps({"nvml_v2": before, "cuda": {"total": cuda_total, "free": cuda_free},
                      "nvml_v2_after_context": after, "processes": processes}))  # fmt: skip
    print(
        f"MiB: NVML total {before['total'] // MIB}, reserved {before['reserved'] // MIB}, "
        f"total - reserved {(before['total'] - before['reserved']) // MIB}, CUDA total {cuda_total // MIB} | "
        f"free: NVML {before['free'] // MIB}, CUDA in this process {cuda_free // MIB}, "
        f"context {(before['free'] - after['free']) // MIB}"
    )


if __name__ == "__main__":
    main()
