"""pytest plugin: how the suite runs in parallel (pytest-xdist) without changing what a test proves.

- Tests that share a module-scoped fixture (a simulator, a bench run) are one `xdist_group`, so one
  worker starts it, not each.
- Tests marked `alone` measure time (rates, latencies, RSS growth per window) against the simulator's
  model of time; other tests sharing the CPU with them fairly would bend what they measure on a
  2-core host. They are one group, and the scheduler hands that group out first, so one worker (the
  window's owner) starts the run with them. While it runs them — the *alone window* — the owner
  keeps its priority and every CPU, and every other worker runs at nice 19 on every CPU but the
  owner's first: the `alone` tests have a core of their own and the first call on the other, and the
  rest of the suite runs on what they leave, beside them instead of after them. When the window
  closes the others take every CPU back at their next test; the nice value stays (lowering it back
  needs privileges), the owner's too, so all workers are equal again (docs/decisions/0010).
- The window assumes the host is otherwise idle: lowered to nice 19, the other workers would yield
  to any other job, and that job would share the owner's core. So the main process reads the host's
  CPU time over 0.3 s before it starts the workers; busier than half a CPU, and there is no window
  (pytest's header says which).
- Where that cannot hold — a busy host, one CPU, a run started at a low priority, an `alone` test on
  a worker that did not start with one (another scheduler, a restarted worker) — the `alone` test
  holds the run's flock exclusively, and every other test holds it shared, so nothing runs beside
  it: the exclusive holder keeps it while its worker's next test is `alone` too, and a turnstile
  flock taken on the way in lets it in before new shared holders. Each wait is bounded by the
  running tests' own deadlines.

Groups need `--dist loadgroup` (pyproject addopts) and pytest < 9.2 (pytest-xdist#1386: the group
suffix xdist puts on the node id no longer takes effect there). Without xdist (`-n 0`) tests run one
at a time and nothing is locked, grouped, reordered or re-prioritised.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Generator
from pathlib import Path
from typing import IO, Protocol

import pytest
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

ALONE = "alone"  # the marker, and the xdist group of the tests it marks
# The one method of xdist's scheduler that AloneFirstScheduling overrides (xdist 3.5-3.8). Without
# it the `alone` group may not come first, so no worker expects a window: the lock does it all.
ALONE_FIRST = hasattr(LoadGroupScheduling, "_assign_work_unit")
LOWERED_NICE = 19  # every worker but the window's owner, from its first test on
OWNER_NICE_MAX = 9  # an owner started above this is not ahead of nice 19 enough: its tests lock
HOST_BUSY_MAX_CPUS = 0.5  # other work on the host before the run, in CPUs: above it, no window
HOST_SAMPLE_S = 0.3


def is_alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker(ALONE) is not None


def shared_fixture_module(item: pytest.Item) -> str | None:
    """The test's module when it uses a module-scoped fixture (pytest's own record of its fixtures)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {defs[-1].scope for defs in info.name2fixturedefs.values() if defs}
    return item.nodeid.split("::")[0] if scopes & {"module", "package"} else None


def busy_cpus(before: str, after: str) -> float:
    """CPUs' worth of busy time between two readings of /proc/stat: everything but idle and iowait
    on its `cpu` line (steal counts as busy: another guest had the CPU), times the number of CPUs."""

    def read(text: str) -> tuple[int, int, int]:
        lines = text.splitlines()
        ticks = [int(v) for v in next(line for line in lines if line.startswith("cpu ")).split()[1:9]]
        cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
        return sum(ticks), ticks[3] + ticks[4], cpus

    total_a, idle_a, cpus = read(before)
    total_b, idle_b, _ = read(after)
    total = total_b - total_a
    return 0.0 if total <= 0 else (total - (idle_b - idle_a)) / total * cpus


def host_busy_cpus() -> float:
    """How busy the host is with other work right now (this process sleeps while it looks)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            before = stat.read()
        time.sleep(HOST_SAMPLE_S)
        with open("/proc/stat", encoding="ascii") as stat:
            return busy_cpus(before, stat.read())
    except (OSError, ValueError, StopIteration):
        return float("inf")  # unknown: no window


class WorkerCpu(Protocol):
    """What a worker may change about its own scheduling; what it starts from then on inherits it."""

    def cpus(self) -> set[int]: ...
    def nice(self) -> int: ...
    def lower_priority(self) -> None: ...
    def run_on(self, cpus: set[int]) -> None: ...


class OwnThreads:
    """WorkerCpu on this process: Linux keeps nice and affinity per thread, so every thread of it."""

    def cpus(self) -> set[int]:
        return set(os.sched_getaffinity(0))

    def nice(self) -> int:
        return os.getpriority(os.PRIO_PROCESS, 0)

    def lower_priority(self) -> None:
        nice = max(LOWERED_NICE, self.nice())
        self._each_thread(lambda tid: os.setpriority(os.PRIO_PROCESS, tid, nice))

    def run_on(self, cpus: set[int]) -> None:
        self._each_thread(lambda tid: os.sched_setaffinity(tid, cpus))

    @staticmethod
    def _each_thread(change: Callable[[int], None]) -> None:
        for tid in os.listdir("/proc/self/task"):
            try:
                change(int(tid))
            except ProcessLookupError:
                continue  # a thread that ended meanwhile


class AloneWindow:
    """One worker's side of the alone window (module docstring); `expected` when the run has
    `alone` tests and the scheduler that hands them out first."""

    def __init__(self, directory: Path, expected: bool, cpu: WorkerCpu) -> None:
        self.lock_path = directory / "alone-window.lock"
        self.opened_path = directory / "alone-window.opened"
        self.expected = expected
        self.cpu = cpu
        self.all_cpus = cpu.cpus()
        self.owner: bool | None = None  # None until this worker's first test
        self.protects = False  # the owner's tests need no lock: the window keeps the others off
        self.confined = False
        self._held: IO[bytes] | None = None

    def enter(self, alone: bool) -> bool:
        """Called before each test; whether this `alone` test runs protected by the window."""
        if self.owner is None:
            self.owner = alone and self.expected
            if self.owner:
                self._open()
            else:
                self._stand_aside()
        elif self._held is not None and not alone:
            self.close()  # the owner's first test after its `alone` ones (else pytest_unconfigure)
        elif self.confined and self._closed():
            self.cpu.run_on(self.all_cpus)
            self.confined = False
        return alone and self._held is not None and self.protects

    def close(self) -> None:
        """The owner's window ends: it drops to the others' priority and lets them have every CPU."""
        if self._held is None:
            return
        self.cpu.lower_priority()
        self._held.close()  # releases the flock: the others see the window closed
        self._held = None

    def _open(self) -> None:
        self._held = self.lock_path.open("ab")
        fcntl.flock(self._held, fcntl.LOCK_EX)  # before the marker: marker + free lock = closed
        self.opened_path.touch()
        self.protects = len(self.all_cpus) >= 2 and self.cpu.nice() <= OWNER_NICE_MAX

    def _stand_aside(self) -> None:
        if not self.expected:
            return  # no window in this run: nothing to make room for
        self.cpu.lower_priority()
        if len(self.all_cpus) >= 2:
            self.cpu.run_on(self.all_cpus - {min(self.all_cpus)})
            self.confined = True

    def _closed(self) -> bool:
        if not self.opened_path.exists():
            return False  # the owner has not started yet
        with self.lock_path.open("ab") as probe:
            try:
                fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        return True


class RunLock:
    """The run's shared/exclusive lock: two files in the directory all workers of one run share."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._run: IO[bytes] | None = None
        self._turnstile: IO[bytes] | None = None
        self.exclusive = False

    def open(self) -> None:
        self._run = (self.directory / "parallel-run.lock").open("ab")
        self._turnstile = (self.directory / "parallel-turnstile.lock").open("ab")

    def close(self) -> None:
        for handle in (self._run, self._turnstile):
            if handle is not None:
                handle.close()  # closing releases its flock

    def enter(self, exclusive: bool) -> None:
        assert self._run is not None and self._turnstile is not None
        if exclusive and self.exclusive:
            return  # kept from the previous `alone` test
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        fcntl.flock(self._run, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.exclusive = exclusive

    def leave(self, keep: bool) -> None:
        assert self._run is not None and self._turnstile is not None
        if keep and self.exclusive:
            return
        fcntl.flock(self._run, fcntl.LOCK_UN)
        if self.exclusive:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.exclusive = False


class AloneFirstScheduling(LoadGroupScheduling):  # type: ignore[misc]  # xdist ships no types
    """xdist's `loadgroup`, except that the `alone` group is the first work unit handed out."""

    workqueue: OrderedDict[str, dict[str, bool]]

    def _assign_work_unit(self, node: WorkerController) -> None:
        if ALONE in self.workqueue:
            self.workqueue.move_to_end(ALONE, last=False)
        super()._assign_work_unit(node)


_LOCK = pytest.StashKey[RunLock]()
_WINDOW = pytest.StashKey[AloneWindow]()
_HOST_BUSY = pytest.StashKey[float]()  # the main process's reading, before the workers start
_WINDOW_ALLOWED = "alone_window"  # its verdict, as each worker's workerinput carries it


def _run_directory(config: pytest.Config) -> Path:
    """A worker's basetemp is `<the run's basetemp>/gwN`: the run's own directory is its parent."""
    return Path(config.option.basetemp).parent


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        if config.getvalue("dist") == "loadgroup" and (config.getoption("numprocesses", None) or 0):
            config.stash[_HOST_BUSY] = host_busy_cpus()
        return
    lock = RunLock(_run_directory(config))
    lock.open()
    config.stash[_LOCK] = lock


def pytest_unconfigure(config: pytest.Config) -> None:
    lock = config.stash.get(_LOCK, None)
    if lock is not None:
        lock.close()
    window = config.stash.get(_WINDOW, None)
    if window is not None:
        window.close()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: WorkerController) -> None:
    busy = node.config.stash.get(_HOST_BUSY, float("inf"))
    node.workerinput[_WINDOW_ALLOWED] = busy <= HOST_BUSY_MAX_CPUS


def pytest_report_header(config: pytest.Config) -> str | None:
    busy = config.stash.get(_HOST_BUSY, None)
    if busy is None:
        return None
    if busy <= HOST_BUSY_MAX_CPUS:
        return f"alone window: on (other work on the host: {busy:.2f} CPUs)"
    return f"alone window: off, `alone` tests lock the others out (other work on the host: {busy:.2f} CPUs)"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadGroupScheduling | None:
    if config.getvalue("dist") != "loadgroup" or not ALONE_FIRST:
        return None  # xdist's own choice
    return AloneFirstScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # every worker collects, and groups the same way
        return
    items[:] = [item for item in items if not is_alone(item)] + [item for item in items if is_alone(item)]
    for item in items:
        group = ALONE if is_alone(item) else shared_fixture_module(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The window is expected when what is left after deselection holds `alone` tests."""
    config = session.config
    if not hasattr(config, "workerinput"):
        return
    # xdist sets a worker's `dist` to "no" and keeps whether the run is `loadgroup` in `loadgroup`.
    loadgroup = bool(getattr(config.option, "loadgroup", False))
    allowed = bool(config.workerinput.get(_WINDOW_ALLOWED, False))
    expected = ALONE_FIRST and allowed and loadgroup and any(is_alone(item) for item in session.items)
    config.stash[_WINDOW] = AloneWindow(_run_directory(config), expected, OwnThreads())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    lock = item.config.stash.get(_LOCK, None)
    window = item.config.stash.get(_WINDOW, None)
    if lock is None or window is None:
        return (yield)
    alone = is_alone(item)
    protected = window.enter(alone)
    lock.enter(exclusive=alone and not protected)
    try:
        return (yield)
    finally:
        lock.leave(keep=alone and is_alone(nextitem))
