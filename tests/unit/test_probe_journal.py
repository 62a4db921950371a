"""The probe journal and its lock, and what `launch --profile` does with a journal at start —
against real processes: one that holds the lock as a live probe would, and a leftover arm."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from launcher.atomicfile import write_atomic
from launcher.errors import AlreadyRunning, BadInput
from launcher.probe.handover import Handover, Serving
from launcher.probe.journal import MARKER_ENV, Entry, Journal, Step
from launcher.probe.leftovers import marked
from launcher.probe.production import Mode, Production
from launcher.probe.recovery import Restored, bring_back, recover, settle_before_serve
from launcher.procgroup import group_members
from launcher.state.store import StateStore
from launcher.supervisor.history import History, utc_now
from tests.doubles import FakeClock

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


# ---- what the journal holds, read back from hostile files ------------------------------------------------


def test_an_unreadable_journal_is_an_operator_error_naming_the_file(state_dir: Path) -> None:
    journal = Journal(state_dir)
    journal.dir.mkdir(parents=True)
    for text in (
        "{not json",
        "[]",
        '{"probe_id": "p"}',
        json.dumps({**entry().to_json(), "step": "dancing"}),
    ):
        journal.path.write_text(text, encoding="utf-8")
        with pytest.raises(BadInput) as err:
            journal.read()
        assert str(journal.path) in err.value.message and err.value.hint is not None, text


def test_only_a_true_parked_flag_means_production_sleeps(state_dir: Path) -> None:
    journal = Journal(state_dir)
    for given, parked in ((True, True), ("yes", False), (1, False), (None, False)):
        data = {**entry().to_json(), "parked": given}
        write_atomic(journal.path, json.dumps(data), mode=0o600)
        read = journal.read()
        assert read is not None and read.parked is parked, given


def test_a_production_env_that_is_not_a_mapping_reads_as_unknown() -> None:
    data = {**entry().production.to_json(), "env": ["PATH=/bin"], "mode": "systemd", "argv": None}
    production = Production.from_json(data)
    assert production.env is None and production.mode is Mode.SYSTEMD and production.argv == ()
    assert Production.from_json({"profile": "p"}).mode is Mode.NONE  # a record without a mode: not running


def test_writing_stamps_the_entry_and_leaves_no_temporary_file(state_dir: Path) -> None:
    journal = Journal(state_dir)
    stale = entry()
    written = journal.write(stale)
    assert written.updated_at >= stale.updated_at and written.probe_id == stale.probe_id
    assert sorted(p.name for p in journal.dir.iterdir()) == ["journal.json"]


# ---- bringing production back, with a handover that records instead of starting ----------------------


class RecordingHandover(Handover):
    """Starts nothing: records `start` and answers `wait_serving` with the phase it was given."""

    def __init__(self, state_dir: Path, phase: str = "serving") -> None:
        super().__init__(state_dir, FakeClock())
        self.phase = phase
        self.asked: list[str] = []

    def start(self, production: Production, *, log_path: Path) -> int | None:
        self.asked.append(f"start {production.mode} log {log_path.name}")
        return None

    def wait_serving(self, profile: str, *, not_pids: set[int], deadline: float) -> Serving:
        self.asked.append(f"wait {profile} until {deadline:.0f}")
        return Serving(self.phase, 77, 12.0, None if self.phase == "serving" else "gates failed")


def dead_probe(step: Step = Step.ARM, mode: Mode = Mode.DETACHED, **more: object) -> Entry:
    unit = "vllm-gate@prod.service" if mode is Mode.SYSTEMD else None
    production = Production("prod", mode, launcher_pid=4242, unit=unit, argv=("launch", "--profile", "prod"))
    return Entry(f"dead-{os.getpid()}-{time.monotonic_ns()}", 999_999, "prod", step, production, **more)  # type: ignore[arg-type]


def back(
    state_dir: Path, handover: RecordingHandover, probe: Entry, not_pids: frozenset[int] = frozenset()
) -> Restored:
    journal = Journal(state_dir)
    journal.write(probe)
    return bring_back(journal, probe, handover, log_path=state_dir / "restore.log", deadline=1600.0,
                      not_pids=set(not_pids))  # fmt: skip


def serving_launcher(state_dir: Path, pid: int) -> None:
    info = StateStore(state_dir).launcher_info_path("prod")
    info.parent.mkdir(parents=True, exist_ok=True)
    info.write_text(json.dumps({"pid": pid, "started_at": utc_now()}))


def test_production_that_was_not_running_is_left_stopped_and_the_journal_cleared(state_dir: Path) -> None:
    handover = RecordingHandover(state_dir)
    restored = back(state_dir, handover, dead_probe(mode=Mode.NONE))
    assert restored == Restored("production was not running before the probe: left stopped", None, (), True)
    assert restored.ok and handover.asked == [] and Journal(state_dir).read() is None


def test_a_detached_production_is_started_again_and_the_journal_cleared_once_it_serves(
    state_dir: Path,
) -> None:
    handover = RecordingHandover(state_dir)
    restored = back(state_dir, handover, dead_probe(arm="seqs", arm_pgid=None))
    assert handover.asked == ["start detached log restore.log", "wait prod until 1600"]
    assert restored.action == "started `launch --profile prod`" and restored.ok and restored.journal_cleared
    assert Journal(state_dir).read() is None


def test_a_systemd_production_is_started_by_its_unit(state_dir: Path) -> None:
    restored = back(state_dir, RecordingHandover(state_dir), dead_probe(mode=Mode.SYSTEMD))
    assert restored.action == "systemctl start vllm-gate@prod.service"


def test_a_restore_that_does_not_serve_keeps_the_journal_at_the_restoring_step(state_dir: Path) -> None:
    handover = RecordingHandover(state_dir, phase="failed")
    restored = back(state_dir, handover, dead_probe(arm="seqs", arm_pgid=4343, arm_started=1.0))
    assert not restored.ok and not restored.journal_cleared
    assert restored.serving == Serving("failed", 77, 12.0, "gates failed")
    kept = Journal(state_dir).read()  # the next `launch probe --recover` or `launch --profile` retries
    assert kept is not None and kept.step is Step.RESTORING and (kept.arm, kept.arm_pgid) == (None, None)


def test_a_launcher_that_already_serves_is_waited_for_not_started_twice(state_dir: Path) -> None:
    serving_launcher(state_dir, os.getpid())
    handover = RecordingHandover(state_dir)
    restored = back(state_dir, handover, dead_probe())
    assert restored.action == f"launcher pid {os.getpid()} already serves it"
    assert handover.asked == ["wait prod until 1600"]


def test_a_launcher_pid_the_probe_must_not_count_is_started_over(state_dir: Path) -> None:
    serving_launcher(state_dir, os.getpid())  # e.g. the dead probe's own pid reused in launcher.json
    handover = RecordingHandover(state_dir)
    back(state_dir, handover, dead_probe(), not_pids=frozenset({os.getpid()}))
    assert handover.asked[0] == "start detached log restore.log"


def test_recover_without_a_journal_does_nothing(state_dir: Path) -> None:
    handover = RecordingHandover(state_dir)
    assert recover(state_dir, handover=handover) is None and handover.asked == []


def test_recover_finishes_a_dead_probes_restore_and_records_it(state_dir: Path) -> None:
    Journal(state_dir).write(dead_probe(Step.STOPPING))
    handover = RecordingHandover(state_dir, phase="failed")
    restored = recover(state_dir, handover=handover, timeout_s=60.0)
    assert restored is not None and not restored.ok
    assert handover.asked[-1] == "wait prod until 1060"  # the fake clock's 1000 s + the timeout
    [record] = History(state_dir / "history.jsonl").read()
    assert (record["event"], record["step"], record["ok"]) == (
        "probe_recovered",
        "stopping-production",
        False,
    )
    assert record["action"] == "started `launch --profile prod`" and record["arm_leftovers"] == []
