"""What NVML and CUDA each say about GPU memory, on the GPU machine: preflight must predict what
vLLM (torch.cuda.mem_get_info, inside its own process) will see. Prints one JSON line and a MiB summary."""
import pynvml as n, json
n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0)
v1 = n.nvmlDeviceGetMemoryInfo(h); v2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
r = {"v1": dict(total=v1.total, free=v1.free, used=v1.used),
     "v2": dict(total=v2.total, reserved=v2.reserved, free=v2.free, used=v2.used)}
import torch
free, total = torch.cuda.mem_get_info()
r["cuda"] = dict(total=total, free=free)
v2b = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
r["v2_after_context"] = dict(total=v2b.total, reserved=v2b.reserved, free=v2b.free, used=v2b.used)
r["procs"] = [(p.pid, p.usedGpuMemory) for p in n.nvmlDeviceGetComputeRunningProcesses(h)]
M = 2**20
print(json.dumps(r))
print("MiB: nvml total", v2.total // M, "reserved", v2.reserved // M, "total-reserved", (v2.total - v2.reserved) // M,
      "cuda total", total // M, "| free nvml before", v2.free // M, "cuda free in-process", free // M,
      "nvml free after context", v2b.free // M, "context", (v2.free - v2b.free) // M)
