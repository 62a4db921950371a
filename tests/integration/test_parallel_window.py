"""The alone window for real (tests/parallel.py): a pytest-xdist run of two workers in a subprocess,
one `alone` test and one other, with the host's reading fixed — idle, then another job on a CPU.

Marked `alone` itself, not because it measures time: inside the suite it must start from the run's
own priority and CPUs, which only the window's owner keeps (the other workers stand aside)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import REPO
from tests.parallel import OWNER_NICE_MAX

pytestmark = pytest.mark.integration

TESTS = """
import fcntl, json, os
from pathlib import Path

import pytest


def run_lock_free_to_share(config: pytest.Config) -> bool:
    path = Path(config.option.basetemp).parent / "parallel-run.lock"
    with path.open("ab") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    return True


def note(name: str, **facts: object) -> None:
    Path(os.environ["WINDOW_FACTS"], name).write_text(json.dumps(facts))


@pytest.mark.alone
def test_timed(request: pytest.FixtureRequest) -> None:
    note("timed", nice=os.getpriority(os.PRIO_PROCESS, 0), shared=run_lock_free_to_share(request.config))


def test_other() -> None:
    note("other", nice=os.getpriority(os.PRIO_PROCESS, 0), cpus=sorted(os.sched_getaffinity(0)))
"""


@pytest.mark.alone
@pytest.mark.parametrize("busy", [0.0, 1.0], ids=["idle-host", "busy-host"])
def test_the_window_opens_on_an_idle_host_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, busy: float
) -> None:
    start_nice = os.getpriority(os.PRIO_PROCESS, 0)
    if start_nice > OWNER_NICE_MAX:
        pytest.skip(f"this run started at nice {start_nice}: no worker of it can be ahead of the others")
    facts = pytester.mkdir("facts")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("WINDOW_FACTS", str(facts))
    pytester.makeconftest(
        "import tests.parallel as parallel\n"
        f"parallel.host_busy_cpus = lambda: {busy}\n"
        "pytest_plugins = ['tests.parallel']\n"
    )
    pytester.makeini("[pytest]\nmarkers =\n    alone: measures time\n")
    pytester.makepyfile(test_two=TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    timed = json.loads((facts / "timed").read_text())
    other = json.loads((facts / "other").read_text())
    cpus = sorted(os.sched_getaffinity(0))
    if busy == 0.0:
        result.stdout.fnmatch_lines(["alone window: on (other work on the host: 0.00 CPUs)"])
        assert timed == {"nice": start_nice, "shared": True}  # the owner keeps its priority, locks nobody out
        if len(cpus) >= 2:  # the other worker stands aside: nice 19, every CPU but the first
            assert other == {"nice": 19, "cpus": cpus[1:]}
    else:
        result.stdout.fnmatch_lines(["alone window: off, `alone` tests lock the others out*1.00 CPUs)"])
        assert timed == {"nice": start_nice, "shared": False}  # no window: it holds the run's lock
        assert other == {"nice": start_nice, "cpus": cpus}  # nobody is moved aside
