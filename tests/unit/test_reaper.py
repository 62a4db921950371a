"""Ending the processes that hold the GPUs (launcher/host/reaper.py), on real child processes this
test starts: SIGTERM, SIGKILL after the grace, proof they are gone and their memory back; and the
processes it must never signal (this one, init, a pid that now belongs to someone else)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from basis.clock import SystemClock
from launcher.host.gpu import MIB, FakeGpuProbe
from launcher.host.process_view import ProcessView, view_of
from launcher.host.reaper import Reaped, ReapOutcome, reap
from tests.doubles import FakeClock
from tests.simserver import HANG_S
from tests.waiters import start_waiter, waiters


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    with waiters() as started:
        yield started


def child(started: list[subprocess.Popen[str]], kind: str = "polite") -> ProcessView:
    proc = start_waiter(started, kind)
    view = view_of(proc.pid)
    assert view is not None
    return view


def test_a_process_that_heeds_sigterm_ends_and_its_gpu_memory_comes_back(
    children: list[subprocess.Popen[str]],
) -> None:
    target = child(children)
    gpus = FakeGpuProbe(total_mib=(81920,))
    gpus.hold(0, target.pid, 30_000)
    report = reap([target], grace_s=HANG_S, deadline_s=HANG_S, clock=SystemClock(), probe=gpus)
    [done] = report.processes
    assert (done.pid, done.outcome) == (target.pid, ReapOutcome.TERMINATED)
    assert children[0].wait(HANG_S) == -signal.SIGTERM
    assert report.gpu_released is True
    assert report.free_bytes_after[0] - report.free_bytes_before[0] == 30_000 * MIB


def test_a_process_deaf_to_sigterm_is_killed_once_the_grace_is_over(
    children: list[subprocess.Popen[str]],
) -> None:
    deaf = child(children, "deaf")
    # the grace's expiry is the outcome: load can only make it come later
    report = reap([deaf], grace_s=0.3, deadline_s=HANG_S, clock=SystemClock())
    assert [(r.pid, r.outcome) for r in report.processes] == [(deaf.pid, ReapOutcome.KILLED)]
    assert children[0].wait(HANG_S) == -signal.SIGKILL
    assert report.gpu_released is None, "no GPU probe: nothing to say about GPU memory"


def test_a_pid_that_now_belongs_to_another_process_is_left_alone(
    children: list[subprocess.Popen[str]],
) -> None:
    target = child(children)
    stale = dataclasses.replace(target, create_time=target.create_time - 100)  # the pid was reused since
    report = reap([stale], grace_s=HANG_S, deadline_s=HANG_S, clock=SystemClock())
    assert report.processes[0].outcome is ReapOutcome.ALREADY_GONE
    assert children[0].poll() is None, "the process that has the pid now was not signalled"


def test_a_process_that_is_gone_already_is_said_to_be() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(HANG_S)
    view = ProcessView(gone.pid, 1, "python3", ("python3",), "root", 0, create_time=0.0)
    report = reap([view], grace_s=HANG_S, deadline_s=HANG_S, clock=SystemClock())
    assert report.processes[0].outcome is ReapOutcome.ALREADY_GONE


def test_this_launcher_and_init_are_never_signalled() -> None:
    me, init = view_of(os.getpid()), view_of(1)
    assert me is not None and init is not None
    report = reap([me, init], grace_s=HANG_S, deadline_s=HANG_S, clock=SystemClock())
    assert [r.outcome for r in report.processes] == [ReapOutcome.REFUSED, ReapOutcome.REFUSED]


def test_memory_the_driver_still_lists_at_the_deadline_is_not_back() -> None:
    me = view_of(os.getpid())
    assert me is not None
    gpus = FakeGpuProbe(total_mib=(81920,))
    gpus.hold(0, me.pid, 1000)  # refused, so it keeps holding: the driver lists it to the end
    clock = FakeClock()
    report = reap([me], grace_s=5, deadline_s=30, clock=clock, probe=gpus)
    assert report.gpu_released is False and clock.now - 1000.0 >= 30
    assert report.free_bytes_before == report.free_bytes_after == {0: (81920 - 1000) * MIB}


def test_a_probe_without_nvml_is_not_asked_about_memory() -> None:
    me = view_of(os.getpid())
    assert me is not None
    report = reap(
        [me], grace_s=1, deadline_s=1, clock=FakeClock(), probe=FakeGpuProbe(reason="no NVML: test")
    )
    assert (report.gpu_released, report.free_bytes_before, report.free_bytes_after) == (None, {}, {})


def test_each_outcome_reads_as_a_sentence() -> None:
    assert Reaped(42, "VLLM::EngineCore", ReapOutcome.SURVIVED, 12.04).describe() == (
        "pid 42 VLLM::EngineCore: still running after SIGKILL (12.0 s)"
    )
    assert str(ReapOutcome.REFUSED) == "refused: this launcher or its parent"
