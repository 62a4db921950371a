"""The probe journal and its lock, and what `launch --profile` does with a journal at start —
against real processes: one that holds the lock as a live probe would, and a leftover arm."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from launcher.errors import AlreadyRunning
from launcher.probe.journal import MARKER_ENV, Entry, Journal, Step
from launcher.probe.leftovers import marked
from launcher.probe.production import Mode, Production
from launcher.probe.recovery import settle_before_serve
from launcher.procgroup import group_members
from launcher.supervisor.history import History

HOLD_LOCK = """
import sys, time
from pathlib import Path
from launcher.probe.journal import Journal
journal = Journal(Path(sys.argv[1]))
assert journal.try_acquire()
print("ready", flush=True)
time.sleep(120)
"""
ARM = "import time; print('ready', flush=True); time.sleep(120)"


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def spawn(
    procs: list[subprocess.Popen[str]], code: str, *args: str, env: dict[str, str] | None = None
) -> int:
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)  # fmt: skip
    procs.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc.pid


def entry(step: Step = Step.ARM, profile: str = "prod", **more: object) -> Entry:
    production = Production("prod", Mode.DETACHED, launcher_pid=4242, argv=("launch", "--profile", "prod"),
                            env={"SECRET": "x"})  # fmt: skip
    return Entry("p1d", 999_999, profile, step, production, **more)  # type: ignore[arg-type]


def test_the_journal_round_trips_and_is_private(state_dir: Path) -> None:
    journal = Journal(state_dir)
    written = journal.write(entry(arm="util030", arm_pgid=1234, arm_started=1.5))
    assert journal.read() == written and written.production.env == {"SECRET": "x"}
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600  # it carries the launcher's environment
    journal.clear()
    assert journal.read() is None


def test_the_lock_tells_a_live_probe_from_a_dead_one(
    state_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    Journal(state_dir).write(entry())
    holder = spawn(procs, HOLD_LOCK, str(state_dir))
    journal = Journal(state_dir)
    assert not journal.try_acquire()
    with pytest.raises(AlreadyRunning) as err, journal:
        pass
    assert "another `launch probe` is running (pid 999999, profile 'prod', step arm)" in err.value.message
    procs[0].kill()
    procs[0].wait(timeout=10)
    assert not psutil.pid_exists(holder) or psutil.Process(holder).status() == psutil.STATUS_ZOMBIE
    assert journal.try_acquire()  # the kernel dropped the dead holder's flock
    journal.release()


def test_a_start_without_a_journal_touches_nothing(state_dir: Path) -> None:
    settle_before_serve(state_dir, "prod")
    assert not (state_dir / "probe").exists()


def test_a_live_probe_refuses_a_second_production_except_its_own_restore(
    state_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    journal = Journal(state_dir)
    journal.write(entry(Step.ARM))
    spawn(procs, HOLD_LOCK, str(state_dir))
    with pytest.raises(AlreadyRunning) as err:
        settle_before_serve(state_dir, "prod")
    assert "`launch probe` (pid 999999) is measuring arms of profile 'prod'" in err.value.message
    assert err.value.exit_code == 2  # systemd does not restart on 2 (RestartPreventExitStatus)
    settle_before_serve(state_dir, "other")  # another profile's launcher is not the probe's business
    journal.write(entry(Step.RESTORING))
    settle_before_serve(state_dir, "prod")  # the probe starting production itself
    assert journal.read() is not None  # the live probe clears it, not the launcher


def test_a_dead_probes_arm_is_ended_and_its_journal_cleared(
    state_dir: Path, procs: list[subprocess.Popen[str]]
) -> None:
    arm = spawn(procs, ARM, env={MARKER_ENV: "p1d"})
    bystander = spawn(procs, ARM, env={MARKER_ENV: "another-probe"})
    assert marked(MARKER_ENV, "p1d") == [arm]
    Journal(state_dir).write(entry(arm="seqs8", arm_pgid=arm, arm_started=time.time() - 5))
    settle_before_serve(state_dir, "prod")
    procs[0].wait(timeout=20)
    assert group_members(arm) == [] and psutil.Process(bystander).is_running()
    assert not Journal(state_dir).path.exists()
    [record] = History(state_dir / "history.jsonl").read()
    assert (
        record["event"] == "probe_recovered" and record["arm_leftovers"] == [arm] and record["step"] == "arm"
    )


def test_a_reused_process_group_is_not_the_arms(procs: list[subprocess.Popen[str]]) -> None:
    older = spawn(procs, ARM)
    assert group_members(older) == [older]
    assert group_members(older, created_after=time.time() + 60) == []  # started before the arm: not it
