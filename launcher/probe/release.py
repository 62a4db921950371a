"""Wait, with a deadline, until the stopped server has let go: its port free, its GPU memory back.

An arm started while production still held GPU 0 died with `Free memory on device cuda:0
(0.3/31.73 GiB)` (field notes): a process that has exited is not yet memory the driver has freed.
The rule is vLLM's own (vllm-facts.md §5.2): each target GPU needs gpu_memory_utilization × total free, and
none of the stopped server's pids may still be listed on it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from tenacity import RetryCallState, Retrying, retry_if_result, wait_fixed

from basis.clock import Clock
from launcher.errors import GateFailed
from launcher.host.gpu import GIB, GpuDevice, GpuProbe, resolve_device
from launcher.host.gpu_sim import gpu_probe
from launcher.host.host_checks import check_port
from launcher.host.policy import GpuDemand, gpu_demand
from launcher.host.report import CheckStatus
from launcher.host.request import HostRequest
from launcher.profile.plan import LaunchPlan

POLL_S = 0.1
WAIT_NOTE_EVERY_S = 5.0


class NotReleased(GateFailed):
    """The port or the GPU memory was still held at the deadline."""


@dataclass(frozen=True, slots=True)
class Release:
    seconds: float
    port: str
    gpus: str  # what was checked, or why GPU memory was not checked

    def describe(self) -> str:
        return f"released after {self.seconds:.1f} s: {self.port}; {self.gpus}"


def wait_released(
    plan: LaunchPlan,
    *,
    gone_pids: Collection[int],
    deadline: float,
    clock: Clock,
    probe_factory: Callable[[], GpuProbe] = gpu_probe,
    on_wait: Callable[[str], None] | None = None,
    port: int | None = None,
) -> Release:
    """Return once `plan` could start here (port bindable, GPU memory back); raise at the deadline.
    `port`: where the arm will listen when not the plan's (production sleeps on its own)."""
    started = clock.monotonic()
    listen_port = plan.port if port is None else port
    demand = gpu_demand(HostRequest.from_plan(plan))
    with probe_factory() as probe:

        def look() -> tuple[bool, str, bool, str]:
            port = check_port(plan.host, listen_port, name_holders=False)  # polled every POLL_S
            port_free = port.status is not CheckStatus.REFUSED
            if demand.uses_gpu:
                gpus_ok, gpu_text = _gpus(probe, demand, gone_pids)
            else:
                gpus_ok, gpu_text = True, f"GPU memory not checked: {demand.no_gpu_reason}"
            return port_free, port.detail, gpus_ok, gpu_text

        def holder() -> str:  # said every WAIT_NOTE_EVERY_S and at the end, not at every poll
            return check_port(plan.host, listen_port).detail

        said = [started]

        def tell(state: RetryCallState) -> None:  # a wait of up to 300 s is never silent
            if on_wait is None or clock.monotonic() - said[0] < WAIT_NOTE_EVERY_S or state.outcome is None:
                return
            said[0] = clock.monotonic()
            port_free, _, gpus_ok, gpu_text = state.outcome.result()
            held = ([] if port_free else [holder()]) + ([] if gpus_ok else [gpu_text])
            on_wait(f"waiting {said[0] - started:.0f} s for the stopped server to let go: " + "; ".join(held))

        # tenacity polls; its stop reads *our* clock (a fake one in tests), and sleeps through it
        port_free, _, gpus_ok, gpu_text = Retrying(
            before_sleep=tell,
            retry=retry_if_result(lambda seen: not (seen[0] and seen[2])),
            stop=lambda _state: clock.monotonic() >= deadline,
            wait=wait_fixed(POLL_S),
            sleep=clock.sleep,
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )(look)
    if port_free and gpus_ok:
        return Release(clock.monotonic() - started, f"port {listen_port} free", gpu_text)
    held = ([] if port_free else [holder()]) + ([] if gpus_ok else [gpu_text])
    raise NotReleased(
        f"the stopped server did not let go within {clock.monotonic() - started:.0f} s: " + "; ".join(held),
        hint="an arm must never start on GPUs another model still holds; "
        "`launch preflight --profile NAME` names the holders",
    )


def _gpus(probe: GpuProbe, demand: GpuDemand, gone_pids: Collection[int]) -> tuple[bool, str]:
    reason = probe.skip_reason()
    if reason is not None:
        return True, f"GPU memory not checked ({reason})"
    utilization = demand.utilization
    devices = probe.devices()
    problems, fine = [], []
    for token in demand.ids:
        device = resolve_device(token, devices)
        if device is None:
            problems.append(f"GPU {token} not found")
            continue
        text = _device_text(device, utilization)
        holders = sorted(p.pid for p in probe.processes(device.index) if p.pid in gone_pids)
        if holders or device.free_bytes < utilization * device.cuda_total_bytes:
            still = f", still listed: pid {', '.join(map(str, holders))}" if holders else ""
            problems.append(text + still)
        else:
            fine.append(text)
    return (not problems), "; ".join(problems or fine)


def _device_text(device: GpuDevice, utilization: float) -> str:
    return (
        f"GPU {device.index}: free {device.free_bytes / GIB:.2f}/{device.cuda_total_bytes / GIB:.2f} GiB, "
        f"needed {utilization * device.cuda_total_bytes / GIB:.2f} GiB"
    )
