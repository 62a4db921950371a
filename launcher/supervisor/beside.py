"""A trial beside production (`[supervisor] trial = "beside"`, docs/park.md): a rejected change costs
clients nothing, an accepted one costs a switch.

Parking still takes production off the air for the candidate's whole trial (104 s for a 2.5 B model
on the H200, 4 minutes for the field notes' 27 B on TP4). Where the GPUs hold both, the candidate
starts on the second port while production keeps serving through the front door:
1. first what must hold: something serves, the second port is free of it, and every GPU of the set
   has vLLM's own start demand (util × total) free plus `beside_margin_gib`, counting what production
   holds (preflight, with production as this launcher's own: not a second model, its locks lent);
   then, with `power_limit_w`, each GPU's power limit lowered through NVML (power_caps.py). Any of
   these failing is recorded (`beside_skipped`) and the change is parked or stopped as before;
2. the candidate starts (borrowing production's GPU locks; never while another engine loads there)
   and its gates run against its own port;
3. passed: it is promoted, the front door sends new requests to it at once, production's requests in
   flight end (drained, up to drain_timeout_s), then production stops — or sleeps, with keep_parked;
   rejected: the candidate is stopped and production, which never stopped serving, serves on as
   last-good;
4. the power limits are restored on every way out (the record restores them after a SIGKILL).
"""

from __future__ import annotations

from gates.chain import ChainReport
from launcher.errors import ExitCode, PreflightRefused
from launcher.profile.candidate import Candidate
from launcher.profile.keys import frontdoor_settings
from launcher.supervisor.bringup import Bringup
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event
from launcher.supervisor.park import Parker
from launcher.supervisor.reload_requests import Outcome, Verdict
from launcher.supervisor.seams import Attempt
from launcher.supervisor.sleep import GIB, can_sleep, other_port
from launcher.supervisor.stage import Stage
from launcher.supervisor.status import Phase


class Beside:
    def __init__(self, ctx: Context, stage: Stage, parker: Parker, bringup: Bringup) -> None:
        self.ctx = ctx
        self.stage = stage
        self.parker = parker
        self.bringup = bringup

    def try_change(self, candidate: Candidate) -> tuple[Verdict, int | None] | None:
        """Try `candidate` beside what serves: the reload's verdict and exit code, or None when it
        cannot be tried beside (the reason recorded: the caller parks or stops what serves)."""
        why, moved = self.why_not(candidate)
        lowered = False
        if why is None:
            why = self._lower_power(moved)
            lowered = why is None and moved.settings.power_limit_w is not None
        if why is not None:
            serving = self.ctx.state.serving
            instead = "park" if serving is not None and serving.candidate.settings.park == "sleep" else "stop"
            self.ctx.transitions.record(
                Event.BESIDE_SKIPPED, label=candidate.label, reason=why, instead=instead
            )
            self.ctx.progress.message(f"not tried beside: {why}; {instead} instead", event="beside.skipped")
            return None
        try:
            return self._trial(moved)
        finally:
            if lowered:
                self._restore_power()

    def why_not(self, candidate: Candidate) -> tuple[str | None, Candidate]:
        """Why `candidate` cannot start beside what serves (None: it can), and the candidate moved to
        the second port."""
        serving = self.ctx.state.serving
        if serving is None:
            return "nothing serves", candidate
        port = other_port(serving.candidate)
        if port is None:
            return "no park_port to start the candidate on", candidate
        if candidate.home_port != serving.candidate.home_port:
            return "the change moves engine.port: nothing to alternate with", candidate
        moved = candidate.at_port(port)
        preflight = self.ctx.hooks.preflight
        if preflight is None:
            return None, moved
        ours = frozenset(serving.engine.process_tree()) | self.parker.parked_pids()
        margin = int(candidate.settings.beside_margin_gib * GIB)
        try:
            preflight(moved, parked=ours, margin_bytes=margin)
        except PreflightRefused as refused:
            return f"preflight beside production: {refused.message}", moved
        return None, moved

    # ---- power -----------------------------------------------------------------------------------
    def _lower_power(self, candidate: Candidate) -> str | None:
        watts = candidate.settings.power_limit_w
        if watts is None:
            return None
        power = self.ctx.hooks.power
        if power is None:
            return "power_limit_w is set, but this launcher has no power control (no host layer)"
        why = power.lower(candidate, watts)
        if why is None:
            self.ctx.progress.message(f"power limit {watts:g} W per GPU for the trial", event="beside.power")
        return why

    def _restore_power(self) -> None:
        power = self.ctx.hooks.power
        problems = power.restore() if power is not None else []
        self.ctx.transitions.record(Event.POWER_RESTORED, problems=problems)
        for problem in problems:
            self.ctx.progress.message(f"power limit not restored: {problem}", event="beside.power_failed")

    # ---- the trial -------------------------------------------------------------------------------
    def _trial(self, candidate: Candidate) -> tuple[Verdict, int | None]:
        production = self.ctx.state.serving
        assert production is not None
        self.ctx.transitions.record(
            Event.BESIDE,
            label=candidate.label,
            port=candidate.port,
            serving=production.candidate.label,
            serving_port=production.candidate.port,
            power_limit_w=candidate.settings.power_limit_w,
        )
        try:
            report = self.bringup.start_and_gate(candidate, None, beside=production)
        except PreflightRefused as refused:  # the GPUs changed since the check: what serves stays
            self.ctx.transitions.record(status={"trial": None})
            detail = f"reload refused: {refused.message}; still serving"  # recorded by the reloader
            return Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), detail), None
        if report is None:  # a stop signal: the launcher leaves, stopping both
            return Verdict(Outcome.FAILED, int(ExitCode.OK), "stopped during the trial"), int(ExitCode.OK)
        guard = self.ctx.hooks.restart_guard(candidate) if self.ctx.hooks.restart_guard else None
        if report.passed:
            if guard is not None:
                guard.record_success(candidate.fingerprint)
            return self._switch(candidate, production, report)
        reason = self.bringup.rejection_reason(candidate, report)
        if guard is not None:
            guard.record_failure(candidate.fingerprint, reason)
        self.bringup.remember_rejection(candidate, reason)
        return self._keep(candidate, production, report, reason)

    def _switch(
        self, candidate: Candidate, production: Attempt, report: ChainReport
    ) -> tuple[Verdict, int | None]:
        """The candidate passed: it serves (the door sends new requests to it at once), production's
        requests in flight end, then production stops (or sleeps, with keep_parked)."""
        self.stage.stop_watch()
        self.ctx.state.take_serving()  # out of the record: from here on, this method alone ends it
        try:
            trial = self.ctx.state.trial
            if trial is not None:
                now = {"trial": None, "engine_pid": trial.engine.pid, "engine_started_at": trial.started_at}
                self.ctx.transitions.record(status=now)
            self.bringup.promote(candidate, report)
            serving = self.ctx.state.serving
            if serving is not None:  # the GPU locks the trial borrowed: the new engine holds them now
                serving.held.enter_context(production.held.pop_all())
        finally:
            self._retire(production, candidate)
        self.ctx.progress.message(
            f"switched to {candidate.label}: production served until the switch",
            event="launcher.downtime",
            down_s=0,
        )
        detail = f"serving {candidate.fingerprint}"
        return Verdict(Outcome.PROMOTED, int(ExitCode.OK), detail, 0.0, {"trial": "beside"}), None

    def _retire(self, production: Attempt, candidate: Candidate) -> None:
        """The engine that served until the switch: its requests in flight end, then it stops or sleeps."""
        why = f"replaced by {candidate.label} (tried beside it)"
        door = self.stage.front_door(production.candidate)
        if door is not None:
            timeout_s = frontdoor_settings(production.candidate.profile_data).drain_timeout_s
            drained = door.drain(production.candidate.port, timeout_s)
            self.ctx.transitions.record(
                Event.DRAINED,
                label=production.candidate.label,
                port=drained.port,
                left=drained.left,
                waited_s=drained.waited_s,
                timeout_s=timeout_s,
                problem=drained.problem,
            )
        settings = production.candidate.settings
        if settings.keep_parked and can_sleep(production.candidate) and self.parker.sleep(production):
            self.stage.drop_parked("a newer engine is parked")
            self.ctx.state.park(production)
            return
        self.stage.stop(production, why)

    def _keep(
        self, candidate: Candidate, production: Attempt, report: ChainReport, reason: str
    ) -> tuple[Verdict, int | None]:
        """The candidate was rejected: it stops; production never stopped serving and serves on as
        last-good — unless it died meanwhile (then last-good starts, as any rollback)."""
        if production.engine.exited.is_set():
            code = self.bringup.roll_back(candidate, report, reason)
            return self._after_rollback(), code
        trial = self.ctx.state.take_trial()
        if trial is not None:
            self.stage.stop(trial, "candidate rejected beside production")
        self.ctx.state.mark_last_good()
        self.ctx.transitions.record(
            Event.REJECTED,
            phase=Phase.SERVING_LAST_GOOD,
            status={"rollback_reason": reason, "trial": None, "detail": production.candidate.label},
            show={"reason": reason},
            ready=f"serving last-good; {reason}",
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            reason=reason,
            beside=True,
        )
        return Verdict(Outcome.ROLLED_BACK, int(ExitCode.ROLLED_BACK), reason, 0.0, {"trial": "beside"}), None

    def _after_rollback(self) -> Verdict:
        status = self.ctx.transitions.board.current
        why = status.rollback_reason or status.detail or ""
        if status.phase == Phase.SERVING_LAST_GOOD:
            return Verdict(Outcome.ROLLED_BACK, int(ExitCode.ROLLED_BACK), why)
        return Verdict(Outcome.FAILED, int(ExitCode.GATE_FAILED), why or f"phase {status.phase}")
