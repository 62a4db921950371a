"""One probe, start to end: arm 0 measured as it serves, production stopped once, each arm tried
(trial.py), then production restored — in `finally`, whatever happened before.

Signals only record (supervisor/attempt.py); the supervisor's `StopOnSignal` helper ends the running
arm's engine so a gate blocked in HTTP returns at once, and the bench notices the same event within
0.1 s. A second signal does not interrupt the restore: only SIGKILL does, and then the journal
finishes it.
"""

from __future__ import annotations

import os
import traceback
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from basis.clock import Clock, SystemClock
from launcher.errors import BadInput, GateError, GateFailed
from launcher.host.gpu import GpuProbe
from launcher.host.gpu_sim import gpu_probe
from launcher.probe.arms import Arm
from launcher.probe.handover import Handover, Serving
from launcher.probe.journal import Entry, Journal, Step
from launcher.probe.measure import BenchMeasure, Measure
from launcher.probe.production import Production, discover
from launcher.probe.recovery import Restored, bring_back
from launcher.probe.results import ArmOutcome, ArmRun, ProbeResult, Settings
from launcher.probe.trial import Trial
from launcher.procgroup import process_tree
from launcher.profile.candidate import Candidate
from launcher.settings import GlobalOptions
from launcher.state.serving import serving_now
from launcher.state.store import StateStore
from launcher.supervisor.attempt import SignalInbox, StopOnSignal
from launcher.supervisor.control import control_and_wait, running_launcher_pid
from launcher.supervisor.history import Event, History, utc_now
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.progress import Progress
from launcher.supervisor.reload_requests import Action, Outcome
from launcher.supervisor.seams import Hooks
from launcher.supervisor.status import Phase, StatusBoard, read_status

LOCK_WAIT_S = 10.0
WAKE_TRIES = 10


class ProbeSession:
    """Constructing starts nothing; `run()` does the whole probe and returns what happened."""

    def __init__(
        self,
        options: GlobalOptions,
        arms: Sequence[Arm],
        settings: Settings,
        *,
        hooks: Hooks | None = None,
        measure: Measure | None = None,
        handover: Handover | None = None,
        clock: Clock | None = None,
        progress: Progress | None = None,
        probe_factory: Callable[[], GpuProbe] = gpu_probe,
        find_production: Callable[[Path, str], Production] = discover,
    ) -> None:
        self.options = options
        self.arms = list(arms)
        self.profile = self.arms[0].name
        self.settings = settings
        self.clock = clock or SystemClock()
        self.handover = handover or Handover(options.state_dir, self.clock)
        self.progress = progress or Progress()
        self.find_production = find_production
        self.probe_id = uuid.uuid4().hex[:12]
        self.inbox = SignalInbox(lambda: None)
        self.journal = Journal(options.state_dir)
        self.store = StateStore(options.state_dir)
        self.history = History(self.store.history_path)
        # `launch status` shows why production is down while the arms run (written as the launcher does).
        self.board = StatusBoard(self.store.status_path(self.profile), self.profile)
        stop = self.inbox.stop_requested
        self.trial = Trial(
            settings=settings,
            hooks=hooks or Hooks(),
            measure=measure
            or BenchMeasure(
                settings.bench, settings.runs, settings.warmup_requests, settings.out_dir, self.probe_id, stop
            ),
            progress=self.progress,
            clock=self.clock,
            probe_factory=probe_factory,
            probe_id=self.probe_id,
            stop=stop,
            history=self.history,
            journal=self._journal,
            gone_pids=set(),
        )
        self.entry: Entry | None = None
        self.box = ExitStack()  # holds `lock` until production comes back
        self.lock: ProfileLock | None = None  # production's profile lock, held while the arms own its GPUs
        self.box_taken = False  # production stopped (its lock held) or parked (its launcher lends the GPUs)
        self.down_since: float | None = None  # production was confirmed stopped; downtime counts from here
        self.stop_how: str | None = None

    def run(self) -> ProbeResult:
        started_at = utc_now()
        runs: list[ArmRun] = []
        error = None
        interrupt = StopOnSignal(self.inbox.stop_requested, self.trial.interrupt, name="probe-stop")
        with self.journal, interrupt:
            self.inbox.install()  # from here on Ctrl-C is recorded, never a KeyboardInterrupt mid-step
            try:
                notes = self._finish_stale()
                production = self.find_production(self.options.state_dir, self.profile)
                check_production(production, self.arms[0])
                self.trial.serving_port = serving_port(self.store, self.profile)
                entry = Entry(
                    self.probe_id,
                    os.getpid(),
                    self.profile,
                    Step.MEASURING,
                    production,
                    out_dir=str(self.settings.out_dir),
                )
                self.entry = self.journal.write(entry)
                arm_names = [a.name for a in self.arms]
                self.history.append(
                    Event.PROBE_STARTED,
                    profile=self.profile,
                    probe_id=self.probe_id,
                    arms=arm_names,
                    production=production.describe(),
                )
                try:
                    self._arms(production, runs)
                except GateError as err:
                    error = err.message
                except Exception as err:  # a bug: production still comes back; the traceback goes to a file
                    error = f"{type(err).__name__}: {err} (traceback in {self._write_traceback()})"
                finally:
                    restored = self._restore()
            finally:
                self.inbox.restore()
        signals = [s.name for s in self.inbox.take() if s.name in ("SIGINT", "SIGTERM")]
        downtime = None
        if self.down_since is not None and restored.ok and restored.serving is not None:
            downtime = self.clock.monotonic() - self.down_since
        self.history.append(
            Event.PROBE_FINISHED,
            profile=self.profile,
            probe_id=self.probe_id,
            restored=restored.ok,
            downtime_s=downtime,
            error=error,
        )
        done = {r.arm.name for r in runs}
        runs += [ArmRun(a, ArmOutcome.NOT_RUN) for a in self.arms if a.name not in done]
        return ProbeResult(
            self.probe_id,
            self.profile,
            production,
            self.settings,
            tuple(runs),
            restored,
            started_at,
            utc_now(),
            downtime,
            self.stop_how,
            signals[0] if signals else None,
            error,
            tuple(notes),
        )

    def _arms(self, production: Production, runs: list[ArmRun]) -> None:
        if not production.running:
            self._take_box(production)
        for arm in self.arms:
            if self.inbox.stop_requested.is_set():
                return
            if not arm.is_production and not self.box_taken:
                self._take_box(production)
                if self.entry is not None and not self.entry.parked:  # a parked one's launcher says so itself
                    self._status(
                        f"launch probe pid {os.getpid()} runs arms; production comes back when it ends"
                    )
            runs.append(self.trial.run(arm, serving=arm.is_production and production.running))
            if arm.is_production and runs[-1].outcome is not ArmOutcome.MEASURED:
                return  # no baseline: production is not taken down for nothing

    def _finish_stale(self) -> list[str]:
        """A journal left by a killed probe: restore production before anything else."""
        entry = self.journal.read()
        if entry is None:
            return []
        self.progress.message(
            "a previous probe did not finish: restoring production first",
            probe_pid=entry.probe_pid,
            step=str(entry.step),
        )
        restored = bring_back(
            self.journal,
            entry,
            self.handover,
            log_path=self.settings.out_dir / "recovered-launcher.log",
            deadline=self.clock.monotonic() + self.settings.restore_timeout_s,
            not_pids={entry.probe_pid, os.getpid()},
        )
        if not restored.ok:
            raise GateFailed(
                f"a previous probe (pid {entry.probe_pid}) left production stopped and it could not be "
                f"restored: {restored.action}; {_serving_text(restored.serving)}",
                hint="see `launch status`; `launch probe --recover` retries",
            )
        return [
            f"a previous probe (pid {entry.probe_pid}, step {entry.step}) was finished first: "
            + restored.action
        ]

    def _take_box(self, production: Production) -> None:
        """Park production (park = "sleep": its launcher puts it to sleep and lends its GPUs) or stop
        it and hold its profile lock: from here on, the arms own the GPUs."""
        if production.running and self._park(production):
            return
        if production.running:
            self._journal(step=Step.STOPPING)
            self.progress.set_phase("stopping production", how=production.describe())
            self.trial.gone_pids = _gone_pids(production.engine_pid)
            self.down_since = self.clock.monotonic()  # downtime counts from the stop request
            deadline = self.down_since + self.settings.stop_timeout_s
            stopped = self.handover.stop(production, deadline=deadline)
            left = f"; ended leftovers {list(stopped.leftovers)}" if stopped.leftovers else ""
            self.stop_how = stopped.how + left
        # No launcher may start this profile while arms run on its GPUs.
        lock = ProfileLock(self.store, self.profile, wait_s=LOCK_WAIT_S, clock=self.clock)
        self.lock = self.box.enter_context(lock)
        self.box_taken = True
        self._journal(step=Step.ARM)

    def _park(self, production: Production) -> bool:
        """Ask production's launcher to sleep and lend its GPUs; False: it cannot (then it is stopped)."""
        if Candidate.from_plan(self.arms[0].plan).settings.park != "sleep":
            return False
        self.progress.set_phase("parking production", how=production.describe())
        self.down_since = self.clock.monotonic()
        try:
            verdict = control_and_wait(
                self.options.state_dir, self.profile, Action.PARK, self.settings.stop_timeout_s
            )
        except GateFailed as err:
            self.progress.message(f"production not parked: {err.message}; stopping it instead")
            return False
        if verdict.outcome is not Outcome.PARKED:
            self.progress.message(f"production not parked: {verdict.detail}; stopping it instead")
            return False
        self.trial.arm_port = int(verdict.data["port"])
        self.trial.parked_pids = frozenset(int(p) for p in verdict.data.get("pids", []))
        self.trial.gone_pids = set()
        self.stop_how = f"parked asleep by launcher pid {production.launcher_pid} ({verdict.detail})"
        self.box_taken = True
        self._journal(step=Step.ARM, parked=True)
        return True

    def _restore(self) -> Restored:
        """Never raises: what went wrong is the result (and the journal stays for a retry)."""
        self.progress.set_phase("restoring production")
        assert self.entry is not None
        try:
            self.trial.stop_current()  # a failure here is no reason to skip the rest: bring_back ends the arm
        finally:
            self.box.close()
            self.lock = None
        if self.entry.parked:
            woken = self._wake()
            if woken is not None:
                return woken
        old = self.entry.production.launcher_pid
        if old is not None and running_launcher_pid(self.options.state_dir, self.profile) == old:
            self.down_since = None  # the stop never took effect: no downtime to report
        try:
            return bring_back(
                self.journal,
                self.entry,
                self.handover,
                log_path=self.settings.out_dir / "production-restart.log",
                deadline=self.clock.monotonic() + self.settings.restore_timeout_s,
                not_pids={os.getpid()},
            )
        except Exception as err:  # GateError (systemctl) or a bug: reported, never swallowed silently
            text = err.message if isinstance(err, GateError) else f"{type(err).__name__}: {err}"
            return Restored(f"restore failed: {text}", Serving("not restarted", None, 0.0, text), (), False)

    def _wake(self) -> Restored | None:
        """Wake the parked production (seconds); None when its launcher cannot (then bring_back)."""
        assert self.entry is not None
        began = self.clock.monotonic()
        for _ in range(WAKE_TRIES):
            try:
                verdict = control_and_wait(
                    self.options.state_dir, self.profile, Action.WAKE, self.settings.restore_timeout_s
                )
            except GateFailed:
                return None
            if verdict.outcome is Outcome.WOKEN:
                status = read_status(self.store.status_path(self.profile)) or {}
                serving = Serving(
                    str(status.get("phase")),
                    self.entry.production.launcher_pid,
                    self.clock.monotonic() - began,
                    verdict.detail,
                )
                self.journal.clear()
                return Restored(f"woken: {verdict.detail}", serving, (), True)
            self.clock.sleep(1.0)  # still parked: an arm's GPU locks not yet given back
        return None

    def _journal(self, **changes: Any) -> None:
        assert self.entry is not None
        self.entry = self.journal.write(replace(self.entry, **changes))

    def _status(self, detail: str) -> None:
        self.board.update(phase=Phase.STOPPED, detail=detail)

    def _write_traceback(self) -> str:
        path = self.settings.out_dir / "probe-error.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc(), encoding="utf-8")
        return str(path)


def serving_port(store: StateStore, profile: str) -> int | None:
    """The port production's engine serves on now (a promoted parked change leaves it on park_port),
    as `launch status` reads it; None when nothing says (arm 0 then uses the profile's engine.port)."""
    url = serving_now(store, profile)["engine_url"]
    return urlsplit(url).port if isinstance(url, str) else None


def check_production(production: Production, arm0: Arm) -> None:
    """Arm 0 measures what serves; the arms are built on the profile: the two must be one launch."""
    if not production.running:
        return
    if production.phase != Phase.SERVING:
        raise BadInput(
            f"profile {arm0.name!r} is {production.phase}, not serving "
            f"(launcher pid {production.launcher_pid}): arm 0 would not measure the profile's launch",
            hint="wait until `launch status` says serving, or fix what it says first",
        )
    rendered = arm0.plan.fingerprint()
    if production.fingerprint != rendered:
        raise BadInput(
            f"launcher pid {production.launcher_pid} serves {arm0.name}@{production.fingerprint}, but the "
            f"profile renders {arm0.name}@{rendered} now: the arms are built on the profile, so they would "
            "differ from arm 0 by more than the keys they name; nothing was touched",
            hint="bring the two in line first (`launch set ... --apply`, `launch rollback`, or a restart)",
        )


def _gone_pids(engine_pid: int | None) -> set[int]:
    """The stopped server's processes; its pid alone when it can no longer be walked."""
    if engine_pid is None:
        return set()
    return set(process_tree(engine_pid)) or {engine_pid}


def _serving_text(serving: Serving | None) -> str:
    if serving is None:
        return "nothing had to serve"
    detail = f" ({serving.detail})" if serving.detail else ""
    return f"{serving.phase} after {serving.seconds:.1f} s{detail}"
