"""The supervisor: start a candidate, gate it, promote it — or roll back to last-good by itself —
then keep watching: engine death, SIGTERM/SIGINT (stop), SIGHUP (reload), the leak monitor.

Exit codes (launcher/errors.py): 0 stopped while serving the candidate, 1 rejected with nothing
to roll back to, 3 stopped while serving last-good, 4 preflight or the restart guard refused, 5
engine died after promotion. A reload that changes nothing, or whose candidate preflight refuses,
keeps the serving engine (`reload_requests` carries each requester's verdict).
"""

from __future__ import annotations

import signal
import threading
import time

from gates.chain import ChainReport
from launcher.errors import ExitCode, PreflightRefused
from launcher.host.orphans import deployment_id
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.redact import redact_argv
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.attempt import Attempt, gate_attempt
from launcher.supervisor.bookkeeping import Bookkeeping
from launcher.supervisor.candidate import Candidate
from launcher.supervisor.history import History, utc_now
from launcher.supervisor.hooks import Hooks
from launcher.supervisor.lifecycle import launch_attempt
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.monitor import LeakMonitor
from launcher.supervisor.progress import Progress
from launcher.supervisor.reload import Reloading
from launcher.supervisor.signals import SignalInbox, StopOnSignal
from launcher.supervisor.status import Phase, StatusBoard
from launcher.supervisor.watchdog import Watchdog
from launcher.supervisor.wayout import finalise, tidy_profile_dir


def _epoch_of(monotonic_s: float) -> float:
    """A monotonic instant as epoch seconds (for comparing with an outside observer's clock)."""
    return round(time.time() - (time.monotonic() - monotonic_s), 6)


class Supervisor(Reloading):
    def __init__(self, options: GlobalOptions, profile: str, *, allow_unknown: bool = False,
                 hooks: Hooks | None = None, progress: Progress | None = None) -> None:  # fmt: skip
        self.options = options
        self.profile = profile
        self.allow_unknown = allow_unknown
        self.hooks = hooks or Hooks()
        self.progress = progress or Progress(notifier=self.hooks.notifier)  # STATUS= while starting
        # Every state write goes through the bookkeeping: a full disk never stops a healthy engine.
        self.books = Bookkeeping(self.hooks.notifier.status)
        self.store = StateStore(options.state_dir, write=self.books.write_file)
        self.history = History(self.store.history_path, write=self.books.append_line)
        self.board = StatusBoard(self.store.status_path(profile), profile, write=self.books.write_file)
        self.deployment = deployment_id(options.state_dir, profile)
        self.progress.engine_log = self.store.engine_log(profile)
        self.wake = threading.Event()
        self.inbox = SignalInbox(self.wake.set)
        self.current: Attempt | None = None
        self.serving_last_good = False
        self.restart_requested = False
        self._stop_lock = threading.RLock()

    # ---- entry point -------------------------------------------------------------------------
    def run(self) -> int:
        # The plan first: a bad name, a missing profile or a cycle writes nothing, not even a lock.
        plan = build_plan(self.options.profiles_dir, self.profile, allow_unknown=self.allow_unknown)
        plan.raise_for_errors()
        with ProfileLock(self.store, self.profile):
            tidy_profile_dir(self.store, self.profile, self.history)
            self.inbox.install()
            stopper = StopOnSignal(self.inbox.stop_requested, self._stop_on_signal, name="stop-on-signal")
            error: BaseException | None = None
            try:
                with stopper:
                    return self._run(plan)
            except BaseException as err:
                error = err
                raise
            finally:
                self._stop_current("launcher exiting")
                finalise(self.board, self.history, self.books, stopping=self.inbox.stop_requested.is_set(),
                         error=error)  # fmt: skip
                self.inbox.restore()

    def _stop_on_signal(self) -> None:
        """A gate may be blocked in an HTTP call when SIGTERM comes: stopping the engine from the
        helper ends that call at once, so the chain returns and the launcher exits within the grace."""
        self._stop_current("stop requested while starting or gating")

    def _run(self, plan: LaunchPlan) -> int:
        outcome = self._bring_up(Candidate.from_plan(plan))
        if outcome is not None:
            return outcome
        return self._supervise()

    # ---- bring-up: candidate, else last-good ------------------------------------------------
    def _bring_up(self, candidate: Candidate, *, reloading: bool = False) -> int | None:
        """Serve `candidate` or last-good; returns an exit code when nothing can be served."""
        guard = self.hooks.restart_guard(candidate) if self.hooks.restart_guard else None
        if guard is not None and not guard.should_retry(candidate.fingerprint):
            reason = f"{candidate.label} not retried: {guard.status(candidate.fingerprint).describe()}"
            if self.store.last_good(self.profile) is None:
                # Nothing else to serve: a refusal (exit 4), which systemd does not restart (exit 1 it would).
                self._record_refusal(candidate, f"restart guard: {reason}")
                raise PreflightRefused(
                    f"restart guard: {reason}",
                    hint="a changed profile is a new candidate; or wait until the window has passed",
                )
            return self._roll_back(candidate, None, reason)
        try:
            report = self._start_and_gate(candidate, Phase.STARTING)
        except PreflightRefused as refused:
            if not reloading:
                self._record_refusal(candidate, refused.message)
                raise
            return self._roll_back(
                candidate, None, f"{candidate.label} refused by preflight: {refused.message}"
            )
        if report is None:
            return int(ExitCode.OK)  # stopped by a signal while starting
        if report.passed:
            if guard is not None:
                guard.record_success(candidate.fingerprint)
            self._promote(candidate, report)
            return None
        failure = report.first_failure
        reason = f"{candidate.label} rejected by {failure.name}: {failure.summary}" if failure else "rejected"
        if guard is not None:
            guard.record_failure(candidate.fingerprint, reason)
        return self._roll_back(candidate, report, reason)

    def _record_refusal(self, candidate: Candidate, reason: str) -> None:
        self.board.update(phase=Phase.FAILED, detail=f"preflight refused: {reason}")
        self.history.append("preflight_refused", profile=self.profile, label=candidate.label, reason=reason)

    def _start_and_gate(self, candidate: Candidate, phase: Phase) -> ChainReport | None:
        if self.hooks.preflight is not None:
            self.hooks.preflight(candidate)
        self.board.update(phase=phase, detail=candidate.label, gates=[])
        self.progress.set_phase(str(phase), candidate=candidate.label)
        self.hooks.notifier.status(f"{phase}: {candidate.label}")
        log_path = self.store.engine_log(self.profile)
        attempt = launch_attempt(candidate, log_path, self.progress, gpu_locks=self.hooks.gpu_locks,
                                 deployment=self.deployment)  # fmt: skip
        attempt.engine.on_exit(self.wake.set)
        attempt.engine.on_death(self.wake.set)
        self.current = attempt
        self.history.append("start", profile=self.profile, label=candidate.label,
                            fingerprint=candidate.fingerprint, engine_pid=attempt.engine.pid,
                            argv=redact_argv(candidate.argv))  # fmt: skip
        self.board.update(engine_pid=attempt.engine.pid, engine_started_at=attempt.started_at)
        if phase is Phase.STARTING:
            self.board.update(phase=Phase.GATING)
            self.progress.set_phase(str(Phase.GATING))
        inbox_stop = self.inbox.stop_requested.is_set
        report = gate_attempt(attempt, self.progress, inbox_stop, self.hooks.gpu_bytes)
        facts = attempt.facts()
        self.store.write_last_facts(
            self.profile, {**facts, "recorded_at": utc_now(), "label": candidate.label}
        )
        self.history.append("gates", profile=self.profile, label=candidate.label,
                            fingerprint=candidate.fingerprint, passed=report.passed,
                            gates=report.to_json())  # fmt: skip
        self.board.update(gates=report.to_json())
        if self.inbox.stop_requested.is_set():
            return None
        return report

    def _promote(self, candidate: Candidate, report: ChainReport) -> None:
        record = {**candidate.to_record(), "promoted_at": utc_now(), "gates": report.to_json()}
        self.store.write_last_good(self.profile, record)
        self.serving_last_good = False
        self.history.append(
            "promoted", profile=self.profile, label=candidate.label, fingerprint=candidate.fingerprint
        )
        self.board.update(phase=Phase.SERVING, serving_profile=self.profile,
                          serving_fingerprint=candidate.fingerprint, rollback_reason=None,
                          detail=candidate.label)  # fmt: skip
        self.progress.set_phase(str(Phase.SERVING), fingerprint=candidate.fingerprint)
        self.hooks.notifier.ready(f"serving {candidate.label}")

    def _roll_back(self, rejected: Candidate, report: ChainReport | None, reason: str) -> int | None:
        self._stop_current("candidate rejected")
        self.history.append("rejected", profile=self.profile, label=rejected.label,
                            fingerprint=rejected.fingerprint, reason=reason)  # fmt: skip
        record = self.store.last_good_to_start(self.profile)
        if record is None:
            self.board.update(
                phase=Phase.FAILED, rollback_reason=reason, detail="no last-good launch recorded"
            )
            self.progress.set_phase(str(Phase.FAILED), reason=reason)
            return int(ExitCode.GATE_FAILED)
        last_good = Candidate.from_record(record)
        self.board.update(phase=Phase.ROLLING_BACK, rollback_reason=reason)
        self.history.append("rollback", profile=self.profile, to=last_good.label, reason=reason)
        lg_report = self._start_and_gate(last_good, Phase.ROLLING_BACK)
        if lg_report is None:
            return int(ExitCode.OK)
        if not lg_report.passed:
            self._stop_current("last-good rejected too")
            self.board.update(phase=Phase.FAILED, detail="last-good failed its gates too")
            self.history.append("failed", profile=self.profile, reason="last-good failed its gates too")
            return int(ExitCode.GATE_FAILED)
        self.serving_last_good = True
        self.board.update(phase=Phase.SERVING_LAST_GOOD, serving_profile=self.profile,
                          serving_fingerprint=last_good.fingerprint, rollback_reason=reason)  # fmt: skip
        self.history.append("serving_last_good", profile=self.profile, label=last_good.label)
        self.progress.set_phase(str(Phase.SERVING_LAST_GOOD), reason=reason)
        self.hooks.notifier.ready(f"serving last-good; {reason}")
        return None

    # ---- after promotion -------------------------------------------------------------------
    def _supervise(self) -> int:
        monitor = LeakMonitor.from_candidate(self.current.candidate if self.current else None)
        watchdog = Watchdog(self.hooks.notifier)
        while True:
            self.wake.wait(timeout=min(monitor.tick_s if monitor else 1.0, watchdog.tick_s))
            self.wake.clear()
            self.books.retry()
            if self.current is not None:
                watchdog.maybe_ping(self.current.candidate)
            signals = self.inbox.take()
            if self.restart_requested:
                self.restart_requested = False
                signals.append(signal.SIGHUP)
            for sig in signals:
                if sig in (signal.SIGTERM, signal.SIGINT):
                    self.hooks.notifier.stopping()
                    self._stop_current(f"{sig.name} received")
                    self.board.update(phase=Phase.STOPPED, engine_pid=None)
                    self.history.append("stopped", profile=self.profile, signal=sig.name)
                    return int(ExitCode.ROLLED_BACK if self.serving_last_good else ExitCode.OK)
                if sig == signal.SIGHUP:
                    code = self._reload()
                    if code is not None:
                        return code
                    monitor = LeakMonitor.from_candidate(self.current.candidate if self.current else None)
            death = self.current.engine.death if self.current is not None else None
            if self.current is not None and death is not None:
                died = death.describe()  # recorded first; stopping the rest drains the pipe after
                self.history.append("engine_died", profile=self.profile, how=died, pid=death.pid,
                                    process=death.name, noticed_at_epoch=_epoch_of(death.noticed_at),
                                    facts=self.current.facts())  # fmt: skip
                if self.hooks.restart_guard is not None:
                    candidate = self.current.candidate
                    self.hooks.restart_guard(candidate).record_failure(
                        candidate.fingerprint, f"engine {died}"
                    )
                self.board.update(
                    phase=Phase.FAILED, detail=f"engine died after promotion: {died}", engine_pid=None
                )
                self.progress.set_phase(str(Phase.FAILED), detail=f"engine died: {died}")
                return int(ExitCode.ENGINE_DIED)
            if monitor is not None and self.current is not None:
                self._watch_memory(monitor)

    def _watch_memory(self, monitor: LeakMonitor) -> None:
        assert self.current is not None
        finding = monitor.sample(self.current.engine.process_tree(), self.hooks.gpu_bytes)
        if finding is not None:
            self.history.append("leak_detected", profile=self.profile, reason=finding, action=monitor.action)
            self.board.update(detail=f"memory leak: {finding}")
            if monitor.action in ("restart", "rollback"):
                self.restart_requested = True  # a reload re-gates; rollback follows if it fails
                self.wake.set()

    def _stop_current(self, why: str) -> None:
        with self._stop_lock:
            self._stop_current_locked(why)

    def _stop_current_locked(self, why: str) -> None:
        if self.current is None:
            return
        report = self.current.stop(grace_s=self.current.candidate.settings.stop_grace_s)
        self.history.append("engine_stopped", profile=self.profile, label=self.current.candidate.label,
                            why=why, graceful=report.graceful, killed=report.killed,
                            leftovers=list(report.leftovers), seconds=round(report.seconds, 3))  # fmt: skip
        self.current = None
