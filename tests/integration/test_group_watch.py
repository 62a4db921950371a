"""The engine's group watch on real processes: a titled grandchild's death is named with its signal;
an untitled helper that comes and goes is not a death."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from launcher.supervisor.group_watch import GroupWatch
from launcher.supervisor.seams import Death

pytestmark = pytest.mark.integration

# A stand-in API server: one short-lived untitled helper, one titled engine core, then waits.
CORE = r"""
core = subprocess.Popen([sys.executable, "-c",
    "import setproctitle, time; setproctitle.setproctitle('VLLM::EngineCore'); "
    "print('titled', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
core.stdout.readline()
print(core.pid, flush=True)
time.sleep(60)
"""
PARENT = (
    r"""
import subprocess, sys, time
subprocess.run([sys.executable, "-c", "pass"])  # a compiler subprocess: exits 0, not a death
"""
    + CORE
)
# The same, with the core started (and titled) only when asked: a startup faster than one re-read.
LATE = (
    r"""
import subprocess, sys, time
sys.stdin.readline()
"""
    + CORE
)


@contextlib.contextmanager
def ended_after(watch: GroupWatch, parent: subprocess.Popen[str]) -> Iterator[list[psutil.Process]]:
    """Yields a list the test puts its child's engine core in; then ends the watch, the parent, and
    that core if the test failed before killing it (psutil refuses a pid that was reused since)."""
    cores: list[psutil.Process] = []
    try:
        yield cores
    finally:
        watch.stop()
        parent.kill()
        parent.wait(timeout=10)
        for core in cores:
            with contextlib.suppress(psutil.Error):
                core.kill()


def test_a_killed_engine_core_is_named_with_its_signal() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    deaths: queue.Queue[Death] = queue.Queue()
    watch = GroupWatch(parent.pid, ("VLLM",), deaths.put)
    with ended_after(watch, parent) as cores:
        assert parent.stdout is not None
        core = int(parent.stdout.readline())
        cores.append(psutil.Process(core))
        watch.start()
        deadline_rounds = 40  # wait until the watch holds a pidfd on the core (it re-reads every 0.5 s)
        while core not in watch.watched() and deadline_rounds:
            deadline_rounds -= 1
            with pytest.raises(queue.Empty):
                deaths.get(timeout=0.25)
        assert watch.watched() == {core: "VLLM::EngineCore"}
        os.kill(core, signal.SIGKILL)
        death = deaths.get(timeout=10)
        assert death.describe() == f"VLLM::EngineCore pid {core} killed by SIGKILL"
        assert deaths.empty()


def test_refresh_now_watches_a_core_titled_after_the_last_re_read() -> None:
    """What the supervisor relies on before it promotes: once refresh_now() returns, a core that
    appeared a moment ago is watched, and its SIGKILL is named as the core's, not the API server's."""
    parent = subprocess.Popen(
        [sys.executable, "-c", LATE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    deaths: queue.Queue[Death] = queue.Queue()
    watch = GroupWatch(parent.pid, ("VLLM",), deaths.put)
    assert not watch.refresh_now(timeout_s=0.1)  # not started: nothing to re-read
    with ended_after(watch, parent) as cores:
        watch.start()
        assert not watch.settled  # a starting engine: its table is re-read every REFRESH_S
        assert watch.refresh_now() and watch.watched() == {}  # the API server alone: untitled
        assert watch.settled  # asked for before promotion: the engine is whole, read it seldom
        assert parent.stdin is not None and parent.stdout is not None
        parent.stdin.write("go\n")
        parent.stdin.flush()
        core = int(parent.stdout.readline())
        cores.append(psutil.Process(core))
        assert watch.refresh_now()
        assert watch.watched() == {core: "VLLM::EngineCore"}
        os.kill(core, signal.SIGKILL)
        assert deaths.get(timeout=10).describe() == f"VLLM::EngineCore pid {core} killed by SIGKILL"
        assert not watch.refresh_now(timeout_s=0.1)  # the watch ended with the first death


def test_death_descriptions_from_wait_statuses() -> None:
    assert Death.from_returncode(7, "API server", -9, 0.0).how() == "killed by SIGKILL"
    assert Death.from_returncode(7, "API server", 0, 0.0).how() == "exited with code 0"
    unknown = Death(8, "VLLM::Worker_TP1", None, 0.0).describe()
    assert unknown.startswith("VLLM::Worker_TP1 pid 8 exited (status not readable")


# A stand-in API server that reaps its engine core the moment it dies (it blocks in wait), as
# vLLM's does within milliseconds: the zombie is gone before the watch can read /proc/PID/stat.
REAPER = r"""
import subprocess, sys
core = subprocess.Popen([sys.executable, "-c",
    "import setproctitle, time; setproctitle.setproctitle('VLLM::EngineCore'); "
    "print('titled', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
core.stdout.readline()
print(core.pid, flush=True)
core.wait()
print("reaped", flush=True)
sys.stdin.readline()
"""


def test_a_core_its_parent_reaps_at_once_is_still_named_with_its_signal() -> None:
    """Three times: the zombie read alone lost this race 7 times in 10 here."""
    from launcher.host.exit_events import ExitEvents

    probe = ExitEvents()
    if not probe.open():
        pytest.skip(f"the kernel's process connector is not open to this test: {probe.unavailable}")
    probe.close()
    for _ in range(3):
        parent = subprocess.Popen(
            [sys.executable, "-c", REAPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        deaths: queue.Queue[Death] = queue.Queue()
        watch = GroupWatch(parent.pid, ("VLLM",), deaths.put)
        with ended_after(watch, parent) as cores:
            assert parent.stdout is not None
            core = int(parent.stdout.readline())
            cores.append(psutil.Process(core))
            watch.start()
            assert watch.refresh_now() and watch.watched() == {core: "VLLM::EngineCore"}
            os.kill(core, signal.SIGKILL)
            death = deaths.get(timeout=10)
            assert parent.stdout.readline().strip() == "reaped"
            assert death.describe() == f"VLLM::EngineCore pid {core} killed by SIGKILL"
            assert death.source in ("/proc/PID/stat", "process connector")


def test_the_hosts_other_exits_do_not_make_the_watch_read_the_process_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was: every exit on the host woke the watch, which then re-read the whole process table; a
    launcher beside 50 exits a second spent 0.4 CPU-s of an 8 s start there. Only a wake, a death or
    the re-read pace may read it."""
    from launcher.host.exit_events import ExitEvents
    from launcher.supervisor import group_watch

    probe = ExitEvents()
    if not probe.open():
        pytest.skip(f"the kernel's process connector is not open to this test: {probe.unavailable}")
    probe.close()
    monkeypatch.setattr(group_watch, "SETTLED_REFRESH_S", 3600.0)  # no timed re-read during the test
    parent = subprocess.Popen(
        [sys.executable, "-c", LATE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    watch = GroupWatch(parent.pid, ("VLLM",), lambda death: None)
    reads: list[bool] = []
    read_table = watch._refresh

    def counted_read() -> bool:
        reads.append(True)
        return read_table()

    monkeypatch.setattr(watch, "_refresh", counted_read)
    with ended_after(watch, parent):
        watch.start()
        assert watch.refresh_now() and watch.settled
        before = len(reads)
        for _ in range(30):
            subprocess.run(["true"], check=True)  # another process of the host, gone at once
        assert watch.refresh_now()  # the one re-read asked for, after every exit was announced
        assert len(reads) == before + 1
