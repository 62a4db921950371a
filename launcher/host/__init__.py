"""Host safety: what must be true of the machine before vLLM starts, and the tools that keep it so.

Preflight checks (GPU memory, vLLM orphans, one model per GPU set, host RAM, port, model path), the
per-GPU locks held for a server's life, orphan reaping, the per-candidate restart guard, systemd
notify and the systemd unit. GPU memory is read through one seam, `gpu.GpuProbe`.
"""
