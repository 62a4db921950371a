"""The pieces serve, try and probe share: the attempt lifecycle's locks when a start fails, the
stop-on-signal helper, the profile lock that waits for a holder on its way out, the tree walker."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from launcher.errors import AlreadyRunning, BadInput
from launcher.procgroup import process_tree
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.state.store import StateStore
from launcher.supervisor.attempt import StopOnSignal, launch_attempt
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.progress import Progress
from tests.doubles import FakeClock
from tests.launcher_run import write_profile

DEADLINE_S = 5.0


@dataclass
class RecordingLocks:
    """Hooks.gpu_locks as a record of what was taken and let go."""

    events: list[str] = field(default_factory=list)

    @contextmanager
    def __call__(self, candidate: Candidate, *, sharing: Candidate | None = None) -> Iterator[None]:
        assert sharing is None, "these tests park no engine whose GPU locks a candidate could share"
        self.events.append(f"take {candidate.profile}")
        try:
            yield
        finally:
            self.events.append(f"release {candidate.profile}")


def test_a_start_that_fails_releases_the_gpu_locks_it_took(profiles_dir: Path, tmp_path: Path) -> None:
    write_profile(profiles_dir, "svc", 18999)
    candidate = replace(Candidate.from_plan(build_plan(profiles_dir, "svc")), argv=("/nonexistent/vllm",))
    locks = RecordingLocks()
    with pytest.raises(BadInput, match="cannot start"):
        launch_attempt(candidate, tmp_path / "engine.log", Progress(), gpu_locks=locks)
    assert locks.events == ["take svc", "release svc"]


def test_stop_on_signal_acts_once_when_asked() -> None:
    requested, acted = threading.Event(), threading.Event()
    calls: list[str] = []

    def action() -> None:
        calls.append("stop")
        acted.set()

    with StopOnSignal(requested, action, name="test-stop"):
        requested.set()
        assert acted.wait(DEADLINE_S)
    assert calls == ["stop"]


def test_stop_on_signal_never_acts_once_closed() -> None:
    requested = threading.Event()
    calls: list[str] = []
    with StopOnSignal(requested, lambda: calls.append("stop"), name="test-stop-closed"):
        pass
    requested.set()
    helper = next(t for t in threading.enumerate() if t.name == "test-stop-closed")
    helper.join(DEADLINE_S)
    assert not helper.is_alive() and calls == []


def test_leaving_waits_for_a_stop_under_way() -> None:
    requested, started, release = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []

    def slow_stop() -> None:
        started.set()
        assert release.wait(DEADLINE_S)
        order.append("stopped")

    helper = StopOnSignal(requested, slow_stop, name="test-stop-slow")
    with helper:
        requested.set()
        assert started.wait(DEADLINE_S)
        threading.Timer(0.05, release.set).start()
    order.append("left")
    assert order == ["stopped", "left"]


def test_profile_lock_waits_for_a_holder_on_its_way_out(tmp_path: Path) -> None:
    holder = ProfileLock(StateStore(tmp_path), "prod").__enter__()

    class LettingGoClock(FakeClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            holder.__exit__(None, None, None)  # the stopped launcher lets go while we wait

    clock = LettingGoClock()
    with ProfileLock(StateStore(tmp_path), "prod", wait_s=10.0, clock=clock) as lock:
        assert lock.holder_pid() == os.getpid()
    assert clock.slept == [0.1]


def test_profile_lock_refuses_once_the_wait_is_over(tmp_path: Path) -> None:
    clock = FakeClock()
    with ProfileLock(StateStore(tmp_path), "prod"):
        with pytest.raises(AlreadyRunning, match=f"pid {os.getpid()}"):
            ProfileLock(StateStore(tmp_path), "prod", wait_s=1.0, clock=clock).__enter__()
        with pytest.raises(AlreadyRunning):
            ProfileLock(StateStore(tmp_path), "prod").__enter__()  # no wait: refused at once
    assert sum(clock.slept) == pytest.approx(1.0)


def test_process_tree_walks_children_and_is_empty_for_a_gone_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        tree = process_tree(os.getpid())
        assert tree[0] == os.getpid() and child.pid in tree
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=DEADLINE_S)
    assert process_tree(child.pid) == []
