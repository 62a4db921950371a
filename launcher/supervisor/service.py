"""The supervisor: start a candidate, gate it, promote it — or roll back to last-good by itself —
then keep watching: engine death, SIGTERM/SIGINT (stop), SIGHUP (reload), and the serving watch's
verdicts (recovery.py: wedged, failing, starving are acted on).

`Supervisor` owns the serving state (state.py) and builds the collaborators over it once: the
stage (stops, what serves, the watch), bring-up, park, lending, recovery and reload. It keeps only
the serve loop: the signals, a death, the lender, the watch's news, in that order each tick.

Exit codes (launcher/errors.py): 0 stopped while serving the candidate, 1 rejected with nothing
to roll back to, 3 stopped while serving last-good, 4 preflight or the restart guard refused, 5
engine died after promotion (or the serving watch judged it bad again with nothing else to serve).
A reload that changes nothing, or whose candidate preflight refuses, keeps the serving engine
(`reload_requests` carries each requester's verdict).
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.errors import BadInput, ExitCode
from launcher.host.orphans import deployment_id
from launcher.profile.candidate import Candidate
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.settings import GlobalOptions
from launcher.state.metrics import LauncherMetrics, metrics_dir
from launcher.state.store import StateStore
from launcher.supervisor.attempt import SignalInbox, StopOnSignal
from launcher.supervisor.beside import Beside
from launcher.supervisor.bookkeeping import Bookkeeping
from launcher.supervisor.bringup import Bringup
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event, History
from launcher.supervisor.lending import Lending
from launcher.supervisor.lock import ProfileLock
from launcher.supervisor.park import Parker
from launcher.supervisor.progress import Progress
from launcher.supervisor.recovery import Recovery
from launcher.supervisor.reload import Reloader
from launcher.supervisor.seams import Execute, Hooks
from launcher.supervisor.stage import Stage
from launcher.supervisor.state import ServingState
from launcher.supervisor.status import (
    Phase,
    StatusBoard,
    Transitions,
    UnwrittenRecord,
    finalise,
    tidy_profile_dir,
)
from launcher.supervisor.watchdog import Watchdog
from launcher.supervisor.wiring import real_execute

TICK_S = 1.0  # the serve loop looks at least this often, even with nothing to wake it


class Supervisor:
    def __init__(
        self,
        options: GlobalOptions,
        profile: str,
        *,
        allow_unknown: bool = False,
        hooks: Hooks | None = None,
        progress: Progress | None = None,
        execute: Execute | None = None,
        retry_rejected: bool = False,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`execute`: the engine seam (the real process and gate chain unless a test scripts them);
        `retry_rejected`: start the profile's candidate even when its gates rejected it before."""
        hooks = hooks or Hooks()
        progress = progress or Progress(notifier=hooks.notifier, clock=clock)  # STATUS= while starting
        # Every state write goes through the bookkeeping: a full disk never stops a healthy engine.
        self.books = Bookkeeping(hooks.notifier.status)
        store = StateStore(options.state_dir, write=self.books.write_file)
        self.history = History(store.history_path, write=self.books.append_line)
        board = StatusBoard(store.status_path(profile), profile, write=self.books.write_file, clock=clock)
        metrics = LauncherMetrics(metrics_dir(options.state_dir), profile, self._past(profile))
        progress.engine_log = store.engine_log(profile)
        self.wake = threading.Event()
        self.inbox = SignalInbox(self.wake.set)
        self.retry_rejected = retry_rejected
        self.ctx = Context(
            profile=profile,
            options=options,
            store=store,
            transitions=Transitions(profile, board, self.history, progress, hooks.notifier, metrics),
            progress=progress,
            hooks=hooks,
            execute=execute or real_execute(),
            clock=clock,
            state=ServingState(),
            inbox=self.inbox,
            wake=self.wake,
            deployment=deployment_id(options.state_dir, profile),
            allow_unknown=allow_unknown,
        )
        self.stage = Stage(self.ctx)
        self.parker = Parker(self.ctx, self.stage)
        self.bringup = Bringup(self.ctx, self.stage, self.parker)
        self.recovery = Recovery(self.ctx, self.stage, self.bringup)
        self.lending = Lending(self.ctx, self.stage, self.parker, self.recovery)
        self.beside = Beside(self.ctx, self.stage, self.parker, self.bringup)
        self.reloader = Reloader(self.ctx, self.stage, self.bringup, self.parker, self.lending, self.beside)
        self.unwritten = UnwrittenRecord(board.path, lambda text, event: progress.message(text, event=event))

    @property
    def state(self) -> ServingState:
        return self.ctx.state

    def _past(self, profile: str) -> list[dict[str, Any]]:
        """The profile's history so far (the metrics' counters go on from it); unreadable: none."""
        try:
            return self.history.read(profile=profile)
        except BadInput:
            return []

    # ---- entry point -------------------------------------------------------------------------
    def run(self) -> int:
        ctx = self.ctx
        # The plan first: a bad name, a missing profile or a cycle writes nothing, not even a lock.
        plan = build_plan(ctx.options.profiles_dir, ctx.profile, allow_unknown=ctx.allow_unknown)
        plan.raise_for_errors()
        with ProfileLock(ctx.store, ctx.profile):
            tidy_profile_dir(ctx.store, ctx.profile, self.history)
            self._restore_power()
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
                self._busy()  # the stops below may take their grace
                self.stage.drop_parked("launcher exiting")
                self.stage.stop_running("launcher exiting")
                finalise(ctx.transitions, self.books, stopping=ctx.stop_requested(), error=error)
                self.inbox.restore()

    def _restore_power(self) -> None:
        """A launcher SIGKILLed during a trial beside production left the GPUs' power limits lowered:
        its record puts them back before anything starts."""
        power = self.ctx.hooks.power
        if power is None or not self.ctx.store.power_caps_path(self.ctx.profile).exists():
            return
        problems = power.restore()
        self.ctx.transitions.record(
            Event.POWER_RESTORED, problems=problems, after="a launcher that was killed"
        )
        for problem in problems:
            self.ctx.progress.message(f"power limit not restored: {problem}", event="beside.power_failed")

    def _stop_on_signal(self) -> None:
        """A gate may be blocked in an HTTP call when SIGTERM comes: stopping the engine from the
        helper ends that call at once, so the chain returns and the launcher exits within the grace."""
        sig = self.inbox.stop_signal
        self.ctx.progress.message(f"{sig} received: stopping", event="launcher.stop", signal=sig)
        self.stage.stop_running("stop requested while starting or gating")

    def _run(self, plan: LaunchPlan) -> int:
        candidate = Candidate.from_plan(plan)
        before = None if self.retry_rejected else self.bringup.rejected_before(candidate)
        if before is not None:
            outcome = self.bringup.roll_back(candidate, None, before)  # what the gates already turned down
        else:
            outcome = self.bringup.bring_up(candidate)
        if outcome is not None:
            return outcome
        return self._supervise()

    # ---- after promotion -------------------------------------------------------------------
    def _supervise(self) -> int:
        ctx = self.ctx
        watchdog = Watchdog(ctx.hooks.notifier, ctx.clock)
        while True:
            ctx.clock.wait(self.wake, min(TICK_S, watchdog.tick_s))
            self.wake.clear()
            self.books.retry()
            ctx.transitions.refresh_metrics()
            serving = ctx.state.serving
            if serving is not None:
                watchdog.maybe_ping(serving.candidate, self.stage.watch_serves if ctx.state.watch else None)
            self._confirm()
            code = self._take_signals()
            if code is None:
                code = self._notice_death()
            if code is None:
                code = self.lending.lender_gone()
            if code is None:
                code = self._take_news()
            if code is not None:
                return code

    def _confirm(self) -> None:
        """status.json promises its next confirmation at the watch's pace while something serves
        (`launch status` calls a record that broke the promise unknown); the journal hears, once,
        when it cannot be written."""
        serving = self.ctx.state.serving
        board = self.ctx.transitions.board
        board.confirm(serving.candidate.settings.canary_interval_s if serving is not None else None)
        self.unwritten.check(self.books.held_back(board.path))

    def _busy(self) -> None:
        """The loop is about to work for a while (a reload, a recovery, a stop): no confirmation
        is promised until it ticks again."""
        self.ctx.transitions.board.confirm(None)

    def _take_news(self) -> int | None:
        news = self.stage.take_news()
        if news is not None:
            self._busy()
        return self.recovery.handle(news)

    def _take_signals(self) -> int | None:
        for sig in self.inbox.take():
            self._busy()
            if sig in (signal.SIGTERM, signal.SIGINT):
                self.ctx.hooks.notifier.stopping()
                serving = self.ctx.state.serving
                if serving is not None:  # clients wait at the door for the next start, not refused
                    self.stage.hold_door(serving.candidate, f"{sig.name} received")
                self.stage.stop_running(f"{sig.name} received")
                self.ctx.transitions.record(
                    Event.STOPPED, phase=Phase.STOPPED, status={"engine_pid": None}, signal=sig.name
                )
                return int(ExitCode.ROLLED_BACK if self.ctx.state.on_last_good else ExitCode.OK)
            if sig == signal.SIGHUP:
                code = self.reloader.reload()
                if code is not None:
                    return code
        return None

    def _notice_death(self) -> int | None:
        serving = self.ctx.state.serving
        death = serving.engine.death if serving is not None else None
        if serving is None or death is None:
            return None
        died = death.describe()  # recorded first; stopping the rest drains the pipe after
        self.stage.stop_watch()
        clock = self.ctx.clock
        self.ctx.transitions.record(
            Event.ENGINE_DIED,
            phase=Phase.FAILED,
            status={"detail": f"engine died after promotion: {died}", "engine_pid": None},
            show={"detail": f"engine died: {died}"},
            how=died,
            pid=death.pid,
            process=death.name,
            source=death.source,
            noticed_at_epoch=round(clock.time() - (clock.monotonic() - death.noticed_at), 6),
            facts=serving.facts(),
        )
        self.stage.hold_door(serving.candidate, f"engine died: {died}")  # clients wait for the next start
        guard = self.ctx.hooks.restart_guard
        if guard is not None:
            candidate = serving.candidate
            guard(candidate).record_failure(candidate.fingerprint, f"engine {died}")
        return int(ExitCode.ENGINE_DIED)
