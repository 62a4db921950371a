"""Ending processes that hold the GPUs: SIGTERM, a grace period, SIGKILL, then proof they are gone.

Orphans are not our children, so they cannot be waited for: exit is watched through pidfds where
the kernel has them (else by polling), against absolute deadlines. With NVML, reaping is finished
only once the driver no longer lists the pids on any GPU, i.e. the memory is back.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

import psutil

from basis.clock import Clock
from launcher.host.gpu import GpuProbe
from launcher.host.process_view import ProcessView, my_lineage

_POLL_S = 0.05


class ReapOutcome(StrEnum):
    TERMINATED = "ended after SIGTERM"
    KILLED = "ended after SIGKILL"
    ALREADY_GONE = "already gone"
    NOT_PERMITTED = "not permitted to signal it"
    SURVIVED = "still running after SIGKILL"
    REFUSED = "refused: this launcher or its parent"


@dataclass(frozen=True, slots=True)
class Reaped:
    pid: int
    label: str
    outcome: ReapOutcome
    seconds: float

    def describe(self) -> str:
        return f"pid {self.pid} {self.label}: {self.outcome} ({self.seconds:.1f} s)"


@dataclass(frozen=True, slots=True)
class ReapReport:
    processes: tuple[Reaped, ...]
    gpu_released: bool | None  # None without NVML; False when the driver still lists a pid at the deadline
    gpu_wait_s: float
    free_bytes_before: dict[int, int]
    free_bytes_after: dict[int, int]


def reap(
    targets: Sequence[ProcessView],
    *,
    grace_s: float,
    deadline_s: float,
    clock: Clock,
    probe: GpuProbe | None = None,
) -> ReapReport:
    """End `targets` (TERM → `grace_s` → KILL) and wait, at most `deadline_s` in all, until gone."""
    started = clock.monotonic()
    deadline = started + deadline_s
    usable = probe if probe is not None and probe.skip_reason() is None else None
    free_before = _free(usable)
    outcomes: dict[int, ReapOutcome] = {}
    ended_at: dict[int, float] = {}
    live: dict[int, psutil.Process] = {}
    protected = my_lineage()
    for target in targets:
        outcomes[target.pid] = _terminate(target, protected, live)
    _wait_gone(live, min(started + grace_s, deadline), clock, ended_at)
    for pid in list(live):
        outcomes[pid] = ReapOutcome.KILLED
        with contextlib.suppress(psutil.NoSuchProcess):
            live[pid].send_signal(signal.SIGKILL)
    _wait_gone(live, deadline, clock, ended_at)
    for pid in live:
        outcomes[pid] = ReapOutcome.SURVIVED
    reaped = tuple(
        Reaped(t.pid, t.label, outcomes[t.pid], ended_at.get(t.pid, clock.monotonic()) - started)
        for t in targets
    )
    gpu_started = clock.monotonic()
    released = _wait_gpu_released(usable, {t.pid for t in targets}, deadline, clock)
    return ReapReport(reaped, released, clock.monotonic() - gpu_started, free_before, _free(usable))


def _terminate(
    target: ProcessView, protected: frozenset[int], live: dict[int, psutil.Process]
) -> ReapOutcome:
    if target.pid in protected or target.pid <= 1:
        return ReapOutcome.REFUSED
    try:
        proc = psutil.Process(target.pid)
        if abs(proc.create_time() - target.create_time) > 0.01 or _ended(proc):
            return ReapOutcome.ALREADY_GONE  # the pid now belongs to someone else, or is a zombie
        proc.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        return ReapOutcome.ALREADY_GONE
    except psutil.AccessDenied:
        return ReapOutcome.NOT_PERMITTED
    live[target.pid] = proc
    return ReapOutcome.TERMINATED


def _ended(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(
    live: dict[int, psutil.Process], until: float, clock: Clock, ended_at: dict[int, float]
) -> None:
    """Drop processes from `live` as they end (a zombie holds no memory: it counts as ended)."""
    with _pidfds(live) as fds:
        while True:
            for pid in [p for p, proc in live.items() if _ended(proc)]:
                del live[pid]
                ended_at[pid] = clock.monotonic()
            remaining = until - clock.monotonic()
            if not live or remaining <= 0:
                return
            watched = [fds[pid] for pid in live if pid in fds]
            _wait_any(watched, min(remaining, 0.5 if len(watched) == len(live) else _POLL_S), clock)


@contextlib.contextmanager
def _pidfds(live: dict[int, psutil.Process]) -> Iterator[dict[int, int]]:
    fds: dict[int, int] = {}
    try:
        for pid in live:
            try:
                fds[pid] = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            except (OSError, AttributeError):
                break  # no pidfds here (old kernel, sandbox): the others are polled
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _wait_any(fds: list[int], timeout_s: float, clock: Clock) -> None:
    """Sleep until one of the pidfds turns readable (its process ended), or `timeout_s` passes."""
    if not fds:
        clock.sleep(min(timeout_s, _POLL_S))
        return
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    poller.poll(max(1, int(timeout_s * 1000)))


def _wait_gpu_released(probe: GpuProbe | None, pids: set[int], deadline: float, clock: Clock) -> bool | None:
    if probe is None or not pids:
        return None
    while True:
        holding = {p.pid for d in probe.devices() for p in probe.processes(d.index)} & pids
        if not holding:
            return True
        if clock.monotonic() >= deadline:
            return False
        clock.sleep(_POLL_S * 2)


def _free(probe: GpuProbe | None) -> dict[int, int]:
    return {} if probe is None else {d.index: d.free_bytes for d in probe.devices()}
