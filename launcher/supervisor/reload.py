"""Reloads (SIGHUP, `launch set --apply`, `launch rollback`): keep what serves unless the change
can really start.

A candidate equal to what serves (same fingerprint) restarts nothing: "already serving <fp>". With
`trial = "beside"` the candidate is tried while what serves goes on serving (beside.py), else — or
when it cannot be — as follows. A
candidate the restart guard or preflight refuses, judged while the serving engine still serves
(what it holds counts as free), leaves that engine serving: exit 4 for the requester. Only then is
the engine parked (park = "sleep") or stopped and the candidate started, gated, promoted, or
replaced by last-good. Control requests (park, wake: `launch probe`) ride on the same SIGHUP and
are answered first (lending.py).
"""

from __future__ import annotations

from launcher.errors import ExitCode, GateError, PreflightRefused
from launcher.profile.candidate import Candidate
from launcher.profile.plan import build_plan
from launcher.supervisor import reload_requests
from launcher.supervisor.beside import Beside
from launcher.supervisor.bringup import Bringup
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event, utc_now
from launcher.supervisor.lending import Lending
from launcher.supervisor.park import Parker
from launcher.supervisor.reload_requests import Outcome, Verdict
from launcher.supervisor.stage import Stage
from launcher.supervisor.status import Phase
from launcher.supervisor.watchdog import Watchdog

SHOWN_PROBLEMS = 3  # a refused reload names this many of the profile's errors; the dry run lists all


class Reloader:
    def __init__(
        self,
        ctx: Context,
        stage: Stage,
        bringup: Bringup,
        parker: Parker,
        lending: Lending,
        beside: Beside,
    ) -> None:
        self.ctx = ctx
        self.stage = stage
        self.bringup = bringup
        self.parker = parker
        self.lending = lending
        self.beside = beside

    def reload(self) -> int | None:
        """Re-plan the profile and serve it; each request's verdict goes to its requester. Control
        requests are answered first; a SIGHUP that brought only those re-plans nothing."""
        ctx = self.ctx
        seq = ctx.transitions.board.current.reload_seq + 1
        reloads = ctx.store.reloads_dir(ctx.profile)
        controls = reload_requests.take_control(reloads)
        for control in controls:
            code = self.lending.answer(control)
            if code is not None:
                return code
        ids = reload_requests.take(reloads)  # before rendering: each request's edit is in the plan
        if controls and not ids:
            return None
        if ctx.state.lent_to is not None:  # the probe's arms run on these GPUs: a reload must wait for it
            detail = (
                f"reload refused: the engine is parked for launch probe pid {ctx.state.lent_to}; still parked"
            )
            self._refused(detail, ready=False)  # no RELOADING=1 was sent: no READY=1 is owed
            refused = Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), detail)
            reload_requests.answer(reloads, ids, refused)
            return None
        ctx.hooks.notifier.reloading()
        ctx.progress.mirror = reload_requests.ProgressFiles(reloads, ids)  # their live progress
        # why, in the journal: `systemctl reload`, `kill -HUP` and the leak monitor leave no request
        ctx.progress.message(
            "reload requested", event="launcher.reload", signal="SIGHUP", requests=",".join(ids) or "none"
        )
        try:
            verdict, code = self._reload_once()
        except GateError as err:  # the launcher is about to exit with it: the requesters hear why first
            reload_requests.answer(reloads, ids, Verdict(Outcome.FAILED, int(err.exit_code), err.message))
            raise
        finally:
            ctx.progress.mirror = None
        ctx.transitions.record(status={"reload_seq": seq})
        reload_requests.answer(reloads, ids, verdict)
        return code

    def _reload_once(self) -> tuple[Verdict, int | None]:
        """The reload's verdict for its requesters, and an exit code when the launcher must leave."""
        state = self.ctx.state
        try:
            plan = build_plan(
                self.ctx.options.profiles_dir, self.ctx.profile, allow_unknown=self.ctx.allow_unknown
            )
            plan.raise_for_errors()
        except GateError as err:
            detail = f"reload refused: {_what_is_wrong(err)}; still serving"
            self._refused(detail)
            return Verdict(Outcome.INVALID, int(ExitCode.BAD_INPUT), detail), None
        candidate = Candidate.from_plan(plan)
        serving = state.serving
        if serving is not None and serving.candidate.same_launch(candidate):
            return self._unchanged(candidate)
        if state.parked is not None and state.parked.candidate.same_launch(candidate):
            return self._reload_to_parked(candidate)
        refusal = self._refusal_before_stop(candidate)
        if refusal is not None:
            detail = f"reload refused: {refusal}; still serving"
            self._refused(detail)
            return Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), detail), None
        warmed = self.parker.read_ahead(candidate)  # while what serves still serves
        if candidate.settings.trial == "beside":
            self.ctx.transitions.record(Event.RELOAD, label=candidate.label, trial="beside", warm=warmed)
            with Watchdog(self.ctx.hooks.notifier, self.ctx.clock).keepalive():
                tried = self.beside.try_change(candidate)
            if tried is not None and tried[0].outcome is Outcome.REFUSED:
                self._refused(tried[0].detail)  # the GPUs changed between the check and the start
            if tried is not None:
                return tried
        return self._reload_to(candidate, warmed)

    def _unchanged(self, candidate: Candidate) -> tuple[Verdict, int | None]:
        """A reload that changes nothing must not cost a restart (80-97 s for the tiny model on the H200)."""
        detail = f"already serving {candidate.fingerprint}"
        if self.ctx.state.on_last_good:  # the file matches what serves again (`launch rollback`)
            self.ctx.state.mark_profile_launch()
            self.ctx.transitions.record(phase=Phase.SERVING, status={"rollback_reason": None})
        return self._keep_serving(Event.RELOAD_NOOP, Verdict(Outcome.UNCHANGED, int(ExitCode.OK), detail))

    def _reload_to_parked(self, candidate: Candidate) -> tuple[Verdict, int | None]:
        """`keep_parked`: the launch asked for sleeps beside what serves; woken, else started."""
        self.ctx.transitions.record(Event.RELOAD, label=candidate.label)
        stopping_at = self.ctx.clock.monotonic()
        with Watchdog(self.ctx.hooks.notifier, self.ctx.clock).keepalive():
            self._drain_serving(candidate)
            if self.parker.back_to_parked(candidate):
                return self._reload_verdict(stopping_at), None
            return self._bring_up(self.parker.park_for(candidate) or candidate, stopping_at)

    def _reload_to(
        self, candidate: Candidate, warmed: dict[str, object] | None
    ) -> tuple[Verdict, int | None]:
        """What serves sleeps beside the candidate (park = "sleep") or stops; the candidate is brought
        up. `warmed`: its weights read ahead (or why not), for the record."""
        self.ctx.transitions.record(Event.RELOAD, label=candidate.label, warm=warmed)
        stopping_at = self.ctx.clock.monotonic()
        with Watchdog(self.ctx.hooks.notifier, self.ctx.clock).keepalive():
            self._drain_serving(candidate)
            moved = self.parker.park_for(candidate)
            if moved is None:
                self.ctx.progress.message(
                    f"stopping what serves for {candidate.label}", event="launcher.reload_stop"
                )
                self.stage.stop_running("reload")
            return self._bring_up(moved or candidate, stopping_at)

    def _bring_up(self, candidate: Candidate, stopping_at: float) -> tuple[Verdict, int | None]:
        """The candidate started and judged, what served parked or stopped for it. Preflight refusing
        it now (its port taken since the check) is the host's problem, not the change's: what served
        comes back and the requester hears exit 4; nothing is held against the change."""
        try:
            code = self.bringup.bring_up(candidate, reloading=True)
        except PreflightRefused as refused:
            detail = f"reload refused: {candidate.label} refused by preflight: {refused.message}"
            self._refused(detail, ready=False)
            code = self.bringup.back_to_last_good([], detail)
            verdict = self._reload_verdict(stopping_at)
            if verdict.outcome is Outcome.ROLLED_BACK:  # what served serves again: the refusal is the verdict
                verdict = Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), detail, verdict.down_s)
            return verdict, code
        return self._reload_verdict(stopping_at), code

    def _drain_serving(self, candidate: Candidate) -> None:
        """Before what serves sleeps or stops for `candidate`: clients wait at the front door, and
        what is in flight ends first (bounded by drain_timeout_s)."""
        serving = self.ctx.state.serving
        if serving is not None:
            self.stage.drain(serving, f"change to {candidate.label}")

    def _refusal_before_stop(self, candidate: Candidate) -> str | None:
        """Why the candidate cannot start, judged while the serving engine still serves (whatever
        it holds counts as free): a refusal keeps it, rather than leave the box with nothing."""
        hooks, state = self.ctx.hooks, self.ctx.state
        guard = hooks.restart_guard(candidate) if hooks.restart_guard else None
        if guard is not None and not guard.should_retry(candidate.fingerprint):
            return f"{candidate.label} not retried: {guard.status(candidate.fingerprint).describe()}"
        if hooks.preflight is None:
            return None
        serving = (
            frozenset(state.serving.engine.group_members()) if state.serving is not None else frozenset()
        )
        if state.parked is not None:  # a sleeper kept beside it is stopped (or the candidate moved) first
            serving |= frozenset(state.parked.engine.group_members())
        moved = self.parker.destination(candidate, beside=candidate.settings.trial == "beside")
        try:
            hooks.preflight(moved, serving=serving)
        except PreflightRefused as refused:
            if moved.port != candidate.port:  # a host problem: the port beside what serves is taken
                return (
                    f"{refused.message} (park_port {moved.port}: the change starts there, beside what serves)"
                )
            return refused.message
        return None

    def _refused(self, detail: str, *, ready: bool = True) -> None:
        """A refused reload: the `reload_refused` record, counted with its reason in status.json and
        the textfile, a warning with the reason in the journal, and systemd told — READY=1 (owed
        after RELOADING=1) only now that the verdict is known, so `systemctl status` shows it."""
        board = self.ctx.transitions.board.current
        self.ctx.progress.message(detail, event="launcher.reload_refused")
        count, last = board.reload_refused + 1, {"at": utc_now(self.ctx.clock), "reason": detail}
        self.ctx.transitions.record(
            Event.RELOAD_REFUSED,
            status={"detail": detail, "reload_refused": count, "last_reload_refusal": last},
            ready=detail if ready else None,
            tell=None if ready else detail,
            reason=detail,
        )

    def _keep_serving(self, event: Event, verdict: Verdict) -> tuple[Verdict, int | None]:
        self.ctx.transitions.record(
            event, status={"detail": verdict.detail}, ready=verdict.detail, reason=verdict.detail
        )
        return verdict, None

    def _reload_verdict(self, stopping_at: float) -> Verdict:
        status = self.ctx.transitions.board.current
        why = status.rollback_reason or status.detail or ""
        if status.phase not in (Phase.SERVING, Phase.SERVING_LAST_GOOD):
            return Verdict(Outcome.FAILED, int(ExitCode.GATE_FAILED), why or f"phase {status.phase}")
        down_s = self.ctx.clock.monotonic() - stopping_at
        self.ctx.progress.message(
            f"engine down {down_s:.1f} s: from the stop for the reload to {status.phase}",
            event="launcher.downtime",
            down_s=round(down_s, 3),
        )
        if status.phase == Phase.SERVING:
            detail = f"serving {status.serving_fingerprint}"
            return Verdict(Outcome.PROMOTED, int(ExitCode.OK), detail, down_s)
        return Verdict(Outcome.ROLLED_BACK, int(ExitCode.ROLLED_BACK), why, down_s)


def _what_is_wrong(err: GateError) -> str:
    """The refusal with the profile's own errors (the first few), as the dry run names them: the
    journal line and `systemctl status` must say what to fix, not only that something is wrong."""
    problems = [str(p)[:200] for p in getattr(err, "problems", [])[:SHOWN_PROBLEMS]]
    return f"{err.message}: {'; '.join(problems)} ({err.hint})" if problems else str(err)
