"""Bring production back: at the end of a probe, and after a probe that was SIGKILLed.

Both paths do the same two things in the same order: end every arm process (the journal's process
group, and anything carrying the probe's marker variable), then — unless a launcher already serves
the profile — start production the way the journal says it ran and wait until it serves. The
journal is removed only once production serves again (or was never running), so a failed restore
is retried by the next `launch probe --recover` or `launch --profile NAME`.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from basis.clock import Clock, SystemClock
from launcher.errors import AlreadyRunning
from launcher.probe.handover import Handover, Serving
from launcher.probe.journal import MARKER_ENV, Entry, Journal, Step
from launcher.probe.leftovers import end_processes, marked
from launcher.procgroup import group_members
from launcher.state.store import StateStore
from launcher.supervisor.control import running_launcher_pid
from launcher.supervisor.history import Event, History

ARM_GRACE_S = 10.0
DEFAULT_RESTORE_TIMEOUT_S = 1800.0  # a large model loads and captures graphs for minutes


@dataclass(frozen=True, slots=True)
class Restored:
    action: str  # what was done, in words
    serving: Serving | None  # None when nothing had to serve
    arm_leftovers: tuple[int, ...]
    journal_cleared: bool

    @property
    def ok(self) -> bool:
        return self.serving is None or self.serving.ok


def end_arm(entry: Entry, clock: Clock) -> tuple[int, ...]:
    """End what is left of the journal's arm; returns the pids that were still there."""
    pids = set(marked(MARKER_ENV, entry.probe_id))
    if entry.arm_pgid is not None:
        pids.update(group_members(entry.arm_pgid, created_after=entry.arm_started))
    pids.discard(os.getpid())
    end_processes(pids, grace_s=ARM_GRACE_S, deadline_s=ARM_GRACE_S * 3, clock=clock)
    return tuple(sorted(pids))


def bring_back(
    journal: Journal,
    entry: Entry,
    handover: Handover,
    *,
    log_path: Path,
    deadline: float,
    not_pids: set[int],
) -> Restored:
    """End the arm, start production unless a launcher serves it, wait; clear the journal when done."""
    left = end_arm(entry, handover.clock)
    production = entry.production
    if not production.running:
        journal.clear()
        return Restored("production was not running before the probe: left stopped", None, left, True)
    journal.write(_restoring(entry))
    running = running_launcher_pid(handover.state_dir, entry.profile)
    if running is None or running in not_pids:
        handover.start(production, log_path=log_path)
        how = (
            f"systemctl start {production.unit}"
            if production.unit
            else f"started `{shlex.join(production.argv)}`"
        )
    else:
        how = f"launcher pid {running} already serves it"
    serving = handover.wait_serving(entry.profile, not_pids=not_pids, deadline=deadline)
    if serving.ok:
        journal.clear()
    return Restored(how, serving, left, serving.ok)


def recover(
    state_dir: Path, *, handover: Handover | None = None, timeout_s: float = DEFAULT_RESTORE_TIMEOUT_S
) -> Restored | None:
    """`launch probe --recover`: finish a dead probe's restore (None: no journal, nothing to do)."""
    journal = Journal(state_dir)
    if not journal.path.exists():
        return None
    with journal:
        entry = journal.read()
        if entry is None:
            return None
        handover = handover or Handover(state_dir, SystemClock())
        restored = bring_back(
            journal,
            entry,
            handover,
            log_path=StateStore(state_dir).probe_restore_log_path,
            deadline=handover.clock.monotonic() + timeout_s,
            not_pids={entry.probe_pid, os.getpid()},
        )
        History(StateStore(state_dir).history_path).append(
            Event.PROBE_RECOVERED,
            profile=entry.profile,
            probe_id=entry.probe_id,
            step=str(entry.step),
            action=restored.action,
            arm_leftovers=list(restored.arm_leftovers),
            ok=restored.ok,
        )
        return restored


def settle_before_serve(state_dir: Path, profile: str) -> None:
    """Called by `launch --profile NAME` before it starts: this launcher *is* the restore.

    A dead probe's arm is ended and its journal removed; a live probe refuses this start (exit 2,
    which systemd does not restart), except while that probe is itself restoring production."""
    journal = Journal(state_dir)
    if not journal.path.exists():
        return
    if not journal.try_acquire():
        entry = journal.read()
        if entry is None or entry.profile != profile or entry.step is Step.RESTORING:
            return
        raise AlreadyRunning(
            f"`launch probe` (pid {entry.probe_pid}) is measuring arms of profile {profile!r} "
            f"(step {entry.step}); it restarts production itself when it ends",
            hint=f"wait for it, or stop it early with `kill -TERM {entry.probe_pid}` (it still restores)",
        )
    try:
        entry = journal.read()
        if entry is None or entry.profile != profile:
            return
        left = end_arm(entry, SystemClock())
        journal.clear()
        History(StateStore(state_dir).history_path).append(
            Event.PROBE_RECOVERED,
            profile=profile,
            probe_id=entry.probe_id,
            step=str(entry.step),
            action="the launcher started production itself",
            arm_leftovers=list(left),
            ok=True,
        )
    finally:
        journal.release()


def _restoring(entry: Entry) -> Entry:
    return replace(entry, step=Step.RESTORING, arm=None, arm_pgid=None)
