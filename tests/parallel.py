"""pytest plugin: how the suite runs in parallel (pytest-xdist) without changing what a test proves.

- Tests that share a module-scoped fixture (a simulator, a bench run) are one `xdist_group`, so one
  worker starts it, not each.
- Tests marked `alone` measure time (rates, latencies, RSS growth per window) against the simulator's
  model of time; the suite's other workers would bend what they measure on a 2-core host. They are
  one group too, so one worker runs them in a row. Every test of a parallel run holds a shared flock
  on one file of the run; an `alone` test holds it exclusively, and keeps it while its worker's next
  test is `alone` too, so the others wait once, not before each. A turnstile flock taken on the way
  in lets the exclusive holder in before new shared holders. Each wait is bounded by the running
  tests' own deadlines.

Groups need `--dist loadgroup` (pyproject addopts) and pytest < 9.2 (pytest-xdist#1386: the group
suffix xdist puts on the node id no longer takes effect there). Without xdist (`-n 0`) tests run one
at a time and nothing is locked, grouped or reordered.
"""

from __future__ import annotations

import fcntl
from collections.abc import Generator
from pathlib import Path
from typing import IO

import pytest


def is_alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("alone") is not None


def shared_fixture_module(item: pytest.Item) -> str | None:
    """The test's module when it uses a module-scoped fixture (pytest's own record of its fixtures)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {defs[-1].scope for defs in info.name2fixturedefs.values() if defs}
    return item.nodeid.split("::")[0] if scopes & {"module", "package"} else None


class RunGate:
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

    def enter(self, alone: bool) -> None:
        assert self._run is not None and self._turnstile is not None
        if alone and self.exclusive:
            return  # kept from the previous `alone` test
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        fcntl.flock(self._run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.exclusive = alone

    def leave(self, keep: bool) -> None:
        assert self._run is not None and self._turnstile is not None
        if keep and self.exclusive:
            return
        fcntl.flock(self._run, fcntl.LOCK_UN)
        if self.exclusive:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.exclusive = False


_GATE = pytest.StashKey[RunGate]()


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    # A worker's basetemp is `<the run's basetemp>/gwN`: the run's own directory is its parent.
    gate = RunGate(Path(config.option.basetemp).parent)
    gate.open()
    config.stash[_GATE] = gate


def pytest_unconfigure(config: pytest.Config) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is not None:
        gate.close()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # every worker collects, and groups the same way
        return
    items[:] = [item for item in items if not is_alone(item)] + [item for item in items if is_alone(item)]
    for item in items:
        group = "alone" if is_alone(item) else shared_fixture_module(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    gate = item.config.stash.get(_GATE, None)
    if gate is None:
        return (yield)
    gate.enter(alone=is_alone(item))
    try:
        return (yield)
    finally:
        gate.leave(keep=is_alone(item) and is_alone(nextitem))
