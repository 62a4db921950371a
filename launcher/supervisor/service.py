"""The supervisor: start a candidate, gate it, promote it — or roll back to last-good by itself —
then keep watching: engine death, SIGTERM/SIGINT (stop), SIGHUP (reload), and the serving watch's
verdicts (recovery.py: wedged, failing, starving are acted on).

Exit codes (launcher/errors.py): 0 stopped while serving the candidate, 1 rejected with nothing
to roll back to, 3 stopped while serving last-good, 4 preflight or the restart guard refused, 5
engine died after promotion (or the serving watch judged it bad again with nothing else to serve).
A reload that changes nothing, or whose candidate preflight refuses, keeps the serving engine
(`reload_requests` carries each requester's verdict).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

from gates.chain import ChainReport
from launcher.errors import BadInput, ExitCode, PreflightRefused
from launcher.host.orphans import deployment_id
from launcher.profile.candidate import Candidate
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.redact import redact_argv
from launcher.settings import GlobalOptions
from launcher.state.metrics import LauncherMetrics, metrics_dir
from launcher.state.store import StateStore
from launcher.supervisor.attempt import SignalInbox, StopOnSignal, launch_attempt
from launcher.supervisor.bookkeeping import Bookkeeping
from launcher.supervisor.history import Event, History, utc_now
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.park import Parking
from launcher.supervisor.progress import Progress
from launcher.supervisor.recovery import Watching
from launcher.supervisor.reload import Reloading
from launcher.supervisor.seams import Attempt, Execute, Hooks
from launcher.supervisor.start_verdict import early_exit, rejection_reason
from launcher.supervisor.status import Phase, StatusBoard, Transitions, finalise, tidy_profile_dir
from launcher.supervisor.watchdog import Watchdog
from launcher.supervisor.wiring import real_execute


def _epoch_of(monotonic_s: float) -> float:
    """A monotonic instant as epoch seconds (for comparing with an outside observer's clock)."""
    return round(time.time() - (time.monotonic() - monotonic_s), 6)


class Supervisor(Reloading, Watching, Parking):
    def __init__(self, options: GlobalOptions, profile: str, *, allow_unknown: bool = False,
                 hooks: Hooks | None = None, progress: Progress | None = None,
                 execute: Execute | None = None, retry_rejected: bool = False) -> None:  # fmt: skip
        """`execute`: the engine seam (the real process and gate chain unless a test scripts them);
        `retry_rejected`: start the profile's candidate even when its gates rejected it before."""
        self.options = options
        self.profile = profile
        self.allow_unknown = allow_unknown
        self.retry_rejected = retry_rejected
        self.hooks = hooks or Hooks()
        self.execute = execute or real_execute()
        self.progress = progress or Progress(notifier=self.hooks.notifier)  # STATUS= while starting
        # Every state write goes through the bookkeeping: a full disk never stops a healthy engine.
        self.books = Bookkeeping(self.hooks.notifier.status)
        self.store = StateStore(options.state_dir, write=self.books.write_file)
        self.history = History(self.store.history_path, write=self.books.append_line)
        self.board = StatusBoard(self.store.status_path(profile), profile, write=self.books.write_file)
        self.metrics = LauncherMetrics(metrics_dir(options.state_dir), profile, self._past(profile))
        self.transitions = Transitions(
            profile, self.board, self.history, self.progress, self.hooks.notifier, self.metrics
        )
        self.deployment = deployment_id(options.state_dir, profile)
        self.progress.engine_log = self.store.engine_log(profile)
        self.wake = threading.Event()
        self.inbox = SignalInbox(self.wake.set)
        self.current: Attempt | None = None
        self.serving_last_good = False
        self._stop_lock = threading.RLock()
        self._init_watching()
        self._init_parking()

    def _past(self, profile: str) -> list[dict[str, Any]]:
        """The profile's history so far (the metrics' counters go on from it); unreadable: none."""
        try:
            return self.history.read(profile=profile)
        except BadInput:
            return []

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
                self._drop_parked("launcher exiting")
                self._stop_current("launcher exiting")
                finalise(
                    self.transitions, self.books, stopping=self.inbox.stop_requested.is_set(), error=error
                )
                self.inbox.restore()

    def _stop_on_signal(self) -> None:
        """A gate may be blocked in an HTTP call when SIGTERM comes: stopping the engine from the
        helper ends that call at once, so the chain returns and the launcher exits within the grace."""
        sig = self.inbox.stop_signal
        self.progress.message(f"{sig} received: stopping", event="launcher.stop", signal=sig)
        self._stop_current("stop requested while starting or gating")

    def _run(self, plan: LaunchPlan) -> int:
        candidate = Candidate.from_plan(plan)
        before = None if self.retry_rejected else self._rejected_before(candidate)
        if before is not None:
            outcome = self._roll_back(candidate, None, before)  # what the gates already turned down
        else:
            outcome = self._bring_up(candidate)
        if outcome is not None:
            return outcome
        return self._supervise()

    def _rejected_before(self, candidate: Candidate) -> str | None:
        """Why a start serves last-good at once: the gates rejected this very launch before (an
        automatic rollback leaves the rejected change in the file; a reboot must not retry it)."""
        try:
            entry = self.store.rejected(self.profile).get(candidate.fingerprint)
            last_good = self.store.last_good(self.profile)
        except BadInput:
            return None  # an unreadable record decides nothing: the candidate is tried
        if (
            not isinstance(entry, dict)
            or last_good is None
            or last_good.get("fingerprint") == candidate.fingerprint
        ):
            return None
        when, why = entry.get("at"), entry.get("reason")
        return (
            f"{candidate.label} was rejected before ({when}: {why}); not retried — "
            f"`launch --profile {self.profile} --retry-rejected` tries it again"
        )

    def _remember_rejection(self, candidate: Candidate, reason: str | None) -> None:
        """Rejected by the gates (`reason`), or promoted (None: forgotten)."""
        try:
            rejected = self.store.rejected(self.profile)
        except BadInput:
            rejected = {}  # rewritten whole: a corrupt file must not block the bookkeeping
        if reason is None and candidate.fingerprint not in rejected:
            return
        rejected.pop(candidate.fingerprint, None)
        if reason is not None:
            rejected[candidate.fingerprint] = {"reason": reason, "at": utc_now(), "label": candidate.label}
        self.store.write_rejected(self.profile, rejected)

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
        reason = self._rejection_reason(candidate, report)
        if guard is not None:
            guard.record_failure(candidate.fingerprint, reason)
        self._remember_rejection(candidate, reason)
        return self._roll_back(candidate, report, reason)

    def _rejection_reason(self, candidate: Candidate, report: ChainReport) -> str:
        """Led by vLLM's own cause when the engine exited before any gate could judge it."""
        failure = report.first_failure
        early = early_exit(self.current, self.store.engine_log(self.profile)) if self.current else None
        return rejection_reason(
            candidate.label, failure.name if failure else None, failure.summary if failure else "", early
        )

    def _record_refusal(self, candidate: Candidate, reason: str) -> None:
        self.transitions.record(
            Event.PREFLIGHT_REFUSED,
            phase=Phase.FAILED,
            status={"detail": f"preflight refused: {reason}"},
            label=candidate.label,
            reason=reason,
        )

    def _start_and_gate(self, candidate: Candidate, phase: Phase) -> ChainReport | None:
        """Preflight, start and gate `candidate` in `phase`: the chain's report, or None when a stop
        signal came meanwhile. PreflightRefused before anything started."""
        if self.hooks.preflight is not None:
            if self.parked is not None:
                self.hooks.preflight(candidate, parked=self._parked_pids())
            else:
                self.hooks.preflight(candidate)
        self.transitions.record(
            phase=phase,
            status={"detail": candidate.label, "gates": []},
            show={"candidate": candidate.label},
            tell=f"{phase}: {candidate.label}",
        )
        attempt = self._spawn(candidate)
        if phase is Phase.STARTING:
            self.transitions.record(phase=Phase.GATING, show={})
        report = self._judge(attempt)
        if self.inbox.stop_requested.is_set():
            return None
        return report

    def _spawn(self, candidate: Candidate) -> Attempt:
        """The candidate's engine, started holding its GPU locks; it is what runs now (`current`)."""
        attempt = launch_attempt(
            candidate,
            self.store.engine_log(self.profile),
            self.progress,
            gpu_locks=self.hooks.gpu_locks,
            deployment=self.deployment,
            engine_factory=self.execute.engine,
            sharing=self.parked.candidate if self.parked is not None else None,
        )
        attempt.engine.on_exit(self.wake.set)
        attempt.engine.on_death(self.wake.set)
        self.current = attempt
        self.transitions.record(
            Event.START,
            status={"engine_pid": attempt.engine.pid, "engine_started_at": attempt.started_at},
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            engine_pid=attempt.engine.pid,
            argv=redact_argv(candidate.argv),
        )
        return attempt

    def _judge(self, attempt: Attempt) -> ChainReport:
        """The chain's report on `attempt`, with its log facts and the report kept on record."""
        candidate = attempt.candidate
        report = self.execute.gates(
            attempt, self.progress, self.inbox.stop_requested.is_set, self.hooks.gpu_bytes
        )
        if report.passed:
            attempt.engine.watch_every_process()  # what serves is watched, however fast it started
        facts = attempt.facts()
        self.store.write_last_facts(
            self.profile, {**facts, "recorded_at": utc_now(), "label": candidate.label}
        )
        self.transitions.record(
            Event.GATES,
            status={"gates": report.to_json()},
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            passed=report.passed,
            gates=report.to_json(),
        )
        return report

    def _promote(self, candidate: Candidate, report: ChainReport) -> None:
        record = {**candidate.to_record(), "promoted_at": utc_now(), "gates": report.to_json()}
        self._keep_previous_good(candidate)
        self.store.write_last_good(self.profile, record)
        self._remember_rejection(candidate, None)
        self.serving_last_good = False
        self.transitions.record(
            Event.PROMOTED,
            phase=Phase.SERVING,
            status={
                "serving_profile": self.profile,
                "serving_fingerprint": candidate.fingerprint,
                "rollback_reason": None,
                "detail": candidate.label,
                **self._fresh_watch(),
            },
            show={"fingerprint": candidate.fingerprint},
            ready=f"serving {candidate.label}",
            label=candidate.label,
            fingerprint=candidate.fingerprint,
        )
        self._after_promotion()
        self._switched(candidate)
        self._start_watch()

    def _keep_previous_good(self, candidate: Candidate) -> None:
        """The launch promoted before this one stays on record: a rollback after a wedge starts it."""
        try:
            old = self.store.last_good_to_start(self.profile)
        except BadInput:
            return  # a corrupt record is no rollback target
        if old is not None and old.get("fingerprint") != candidate.fingerprint:
            self.store.write_previous_good(self.profile, old)

    def _roll_back(self, rejected: Candidate, report: ChainReport | None, reason: str) -> int | None:
        """`rejected` is stopped and last-good serves instead: woken where it sleeps beside it, else
        started as recorded and gated; an exit code when nothing can be served."""
        rejected_pids = self.current.engine.process_tree() if self.current is not None else []
        self._stop_current("candidate rejected")
        self.transitions.record(
            Event.REJECTED, label=rejected.label, fingerprint=rejected.fingerprint, reason=reason
        )
        if self.parked is not None and self._wake_parked(rejected_pids, reason):
            return None  # last-good was asleep beside it: woken and re-gated in seconds
        record = self.store.last_good_to_start(self.profile)
        if record is None:
            self.transitions.record(
                phase=Phase.FAILED,
                status={"rollback_reason": reason, "detail": "no last-good launch recorded"},
                show={"reason": reason},
            )
            return int(ExitCode.GATE_FAILED)
        return self._serve_last_good(Candidate.from_record(record), reason)

    def _serve_last_good(self, last_good: Candidate, reason: str) -> int | None:
        self.transitions.record(
            Event.ROLLBACK,
            phase=Phase.ROLLING_BACK,
            status={"rollback_reason": reason},
            to=last_good.label,
            reason=reason,
        )
        lg_report = self._start_and_gate(last_good, Phase.ROLLING_BACK)
        if lg_report is None:
            return int(ExitCode.OK)
        if not lg_report.passed:
            self._stop_current("last-good rejected too")
            why = "last-good failed its gates too"
            self.transitions.record(Event.FAILED, phase=Phase.FAILED, status={"detail": why}, reason=why)
            return int(ExitCode.GATE_FAILED)
        self.serving_last_good = True
        self.transitions.record(
            Event.SERVING_LAST_GOOD,
            phase=Phase.SERVING_LAST_GOOD,
            status={
                "serving_profile": self.profile,
                "serving_fingerprint": last_good.fingerprint,
                "rollback_reason": reason,
                **self._fresh_watch(),
            },
            show={"reason": reason},
            ready=f"serving last-good; {reason}",
            label=last_good.label,
        )
        self._switched(last_good)
        self._start_watch()
        return None

    # ---- after promotion -------------------------------------------------------------------
    def _supervise(self) -> int:
        watchdog = Watchdog(self.hooks.notifier)
        while True:
            self.wake.wait(timeout=min(1.0, watchdog.tick_s))
            self.wake.clear()
            self.books.retry()
            self.metrics.maybe_refresh()
            if self.current is not None:
                watchdog.maybe_ping(self.current.candidate, self.watch_serves if self.watch else None)
            code = self._take_signals()
            if code is None:
                code = self._notice_death()
            if code is None:
                code = self._lender_gone()
            if code is None:
                code = self._handle_watch_news()
            if code is not None:
                return code

    def _take_signals(self) -> int | None:
        for sig in self.inbox.take():
            if sig in (signal.SIGTERM, signal.SIGINT):
                self.hooks.notifier.stopping()
                self._stop_current(f"{sig.name} received")
                self.transitions.record(
                    Event.STOPPED, phase=Phase.STOPPED, status={"engine_pid": None}, signal=sig.name
                )
                return int(ExitCode.ROLLED_BACK if self.serving_last_good else ExitCode.OK)
            if sig == signal.SIGHUP:
                code = self._reload()
                if code is not None:
                    return code
        return None

    def _notice_death(self) -> int | None:
        death = self.current.engine.death if self.current is not None else None
        if self.current is None or death is None:
            return None
        died = death.describe()  # recorded first; stopping the rest drains the pipe after
        self._stop_watch()
        self.transitions.record(
            Event.ENGINE_DIED,
            phase=Phase.FAILED,
            status={"detail": f"engine died after promotion: {died}", "engine_pid": None},
            show={"detail": f"engine died: {died}"},
            how=died,
            pid=death.pid,
            process=death.name,
            source=death.source,
            noticed_at_epoch=_epoch_of(death.noticed_at),
            facts=self.current.facts(),
        )
        if self.hooks.restart_guard is not None:
            candidate = self.current.candidate
            self.hooks.restart_guard(candidate).record_failure(candidate.fingerprint, f"engine {died}")
        return int(ExitCode.ENGINE_DIED)

    def _stop_current(self, why: str) -> None:
        with self._stop_lock:
            self._stop_current_locked(why)

    def _stop_current_locked(self, why: str) -> None:
        if self.current is None:
            return
        self._stop_watch()  # what is stopped now is no news
        report = self.current.stop(grace_s=self.current.candidate.settings.stop_grace_s)
        self.transitions.record(
            Event.ENGINE_STOPPED,
            label=self.current.candidate.label,
            why=why,
            graceful=report.graceful,
            killed=report.killed,
            leftovers=list(report.leftovers),
            seconds=round(report.seconds, 3),
        )
        self.current = None
