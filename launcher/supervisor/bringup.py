"""Bring-up: start a candidate, gate it, promote it — or roll back to last-good by itself.

`bring_up` serves the candidate or last-good (an exit code when nothing can be served): the restart
guard first, then preflight, the start and the chain. A pass promotes (`last_good.json`, READY=1, the
sleeper's GPU locks handed over); a rejection stops the candidate, remembers it (a reboot must not
retry the same launch), and `roll_back` serves last-good: woken where it sleeps beside the candidate
(park.py), else started as recorded and gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gates.chain import ChainReport
from launcher.errors import BadInput, ExitCode, PreflightRefused
from launcher.logfacts.timeline_report import render_line, start_record
from launcher.profile.candidate import Candidate
from launcher.redact import redact_argv
from launcher.supervisor.attempt import launch_attempt
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event, utc_now
from launcher.supervisor.park import Parker
from launcher.supervisor.seams import Attempt
from launcher.supervisor.stage import Stage
from launcher.supervisor.start_verdict import early_exit, rejection_reason
from launcher.supervisor.status import Phase


class Bringup:
    def __init__(self, ctx: Context, stage: Stage, parker: Parker) -> None:
        self.ctx = ctx
        self.stage = stage
        self.parker = parker

    # ---- what the gates turned down before ----------------------------------------------------------
    def rejected_before(self, candidate: Candidate) -> str | None:
        """Why a start serves last-good at once: the gates rejected this very launch before (an
        automatic rollback leaves the rejected change in the file; a reboot must not retry it). A
        corrupt rejected list may have named it: the file is kept aside, that is said, and the
        candidate is recorded as rejected (`--retry-rejected` tries it, as any rejected launch)."""
        store, profile = self.ctx.store, self.ctx.profile
        rejected, unreadable = store.rejected_or_set_aside(profile, self.ctx.clock.time())
        try:
            last_good = store.last_good(profile)
        except BadInput:
            last_good = None  # an unreadable record decides nothing: the candidate is tried
        retry = f"not retried — `launch --profile {profile} --retry-rejected` tries it again"
        if last_good is None or last_good.get("fingerprint") == candidate.fingerprint:
            if unreadable is not None:  # nothing else to serve, or it is what served: it is tried
                self.ctx.progress.message(f"rejected launches unknown: {unreadable}", event="state.set_aside")
            return None
        if unreadable is not None:
            reason = f"not known to have passed ({unreadable})"
            self.remember_rejection(candidate, reason)  # the next start decides the same
            return f"{candidate.label} is {reason}; {retry}"
        entry = rejected.get(candidate.fingerprint)
        if not isinstance(entry, dict):
            return None
        return f"{candidate.label} was rejected before ({entry.get('at')}: {entry.get('reason')}); {retry}"

    def remember_rejection(self, candidate: Candidate, reason: str | None) -> None:
        """Rejected by the gates (`reason`), or promoted (None: forgotten). A corrupt list is kept
        aside (said) and rewritten whole: it must not block the bookkeeping."""
        store, profile = self.ctx.store, self.ctx.profile
        rejected, unreadable = store.rejected_or_set_aside(profile, self.ctx.clock.time())
        if unreadable is not None:
            self.ctx.progress.message(f"rejected launches unknown: {unreadable}", event="state.set_aside")
        if reason is None and candidate.fingerprint not in rejected:
            return
        rejected.pop(candidate.fingerprint, None)
        if reason is not None:
            rejected[candidate.fingerprint] = {
                "reason": reason,
                "at": utc_now(self.ctx.clock),
                "label": candidate.label,
            }
        store.write_rejected(profile, rejected)

    # ---- bring-up: candidate, else last-good -----------------------------------------------------------
    def bring_up(self, candidate: Candidate, *, reloading: bool = False) -> int | None:
        """Serve `candidate` or last-good; returns an exit code when nothing can be served.
        PreflightRefused when preflight refuses `candidate` (nothing started; recorded at a start)."""
        hooks = self.ctx.hooks
        guard = hooks.restart_guard(candidate) if hooks.restart_guard else None
        if guard is not None and not guard.should_retry(candidate.fingerprint):
            reason = f"{candidate.label} not retried: {guard.status(candidate.fingerprint).describe()}"
            if self.ctx.store.last_good(self.ctx.profile) is None:
                # Nothing else to serve: a refusal (exit 4), which systemd does not restart (exit 1 it would).
                self.record_refusal(candidate, f"restart guard: {reason}")
                raise PreflightRefused(
                    f"restart guard: {reason}",
                    hint="a changed profile is a new candidate; or wait until the window has passed",
                )
            return self.roll_back(candidate, None, reason)
        try:
            report = self.start_and_gate(candidate, Phase.STARTING)
        except PreflightRefused as refused:
            if not reloading:  # a reload's refusal is the host's, not the change's: reload.py says so
                self.record_refusal(candidate, refused.message)
            raise
        if report is None:
            return int(ExitCode.OK)  # stopped by a signal while starting
        if report.passed:
            if guard is not None:
                guard.record_success(candidate.fingerprint)
            self.promote(candidate, report)
            return None
        reason = self.rejection_reason(candidate, report)
        if guard is not None:
            guard.record_failure(candidate.fingerprint, reason)
        self.remember_rejection(candidate, reason)
        return self.roll_back(candidate, report, reason)

    def rejection_reason(self, candidate: Candidate, report: ChainReport) -> str:
        """Led by vLLM's own cause when the engine exited before any gate could judge it."""
        failure = report.first_failure
        trial = self.ctx.state.trial
        early = early_exit(trial, self.ctx.store.engine_log(self.ctx.profile)) if trial else None
        return rejection_reason(
            candidate.label, failure.name if failure else None, failure.summary if failure else "", early
        )

    def record_refusal(self, candidate: Candidate, reason: str) -> None:
        self.ctx.transitions.record(
            Event.PREFLIGHT_REFUSED,
            phase=Phase.FAILED,
            status={"detail": f"preflight refused: {reason}"},
            label=candidate.label,
            reason=reason,
        )

    # ---- one start and its judgement -------------------------------------------------------------------
    def start_and_gate(
        self, candidate: Candidate, phase: Phase | None, *, beside: Attempt | None = None
    ) -> ChainReport | None:
        """Preflight, start and gate `candidate` in `phase` (it is the trial meanwhile): the chain's
        report, or None when a stop signal came meanwhile. PreflightRefused before anything started.
        `beside`: what serves and goes on serving meanwhile (the phase stays; beside.py)."""
        preflight = self.ctx.hooks.preflight
        if preflight is not None:
            ours = self.parker.parked_pids()
            if beside is not None:
                ours |= frozenset(beside.engine.process_tree())
            if ours:
                preflight(candidate, parked=ours)
            else:
                preflight(candidate)
        if phase is not None:
            self.ctx.transitions.record(
                phase=phase,
                status={"detail": candidate.label, "gates": []},
                show={"candidate": candidate.label},
                tell=f"{phase}: {candidate.label}",
            )
        attempt = self.spawn(candidate, beside=beside)
        if phase is Phase.STARTING:
            self.ctx.transitions.record(phase=Phase.GATING, show={})
        report = self.judge(attempt)
        if self.ctx.stop_requested():
            return None
        return report

    def spawn(self, candidate: Candidate, *, beside: Attempt | None = None) -> Attempt:
        """The candidate's engine, started holding its GPU locks (borrowed from the engine beside it or
        asleep, where there is one); it is the trial now."""
        ctx = self.ctx
        parked = ctx.state.parked
        sharing = beside or parked
        attempt = launch_attempt(
            candidate,
            ctx.store.engine_log(ctx.profile),
            ctx.progress,
            gpu_locks=ctx.hooks.gpu_locks,
            deployment=ctx.deployment,
            engine_factory=ctx.execute.engine,
            sharing=sharing.candidate if sharing is not None else None,
            loading=ctx.hooks.loading,
        )
        attempt.engine.on_exit(ctx.wake.set)
        attempt.engine.on_death(ctx.wake.set)
        ctx.state.begin_trial(attempt)
        where: dict[str, Any] = {"engine_pid": attempt.engine.pid, "engine_started_at": attempt.started_at}
        if beside is not None:  # what serves keeps the status's engine; the trial is apart
            where = {"trial": {"label": candidate.label, "port": candidate.port, **where}}
        ctx.transitions.record(
            Event.START,
            status=where,
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            engine_pid=attempt.engine.pid,
            argv=redact_argv(candidate.argv),
        )
        return attempt

    def judge(self, attempt: Attempt) -> ChainReport:
        """The chain's report on `attempt`, with its log facts and the report kept on record."""
        ctx = self.ctx
        candidate = attempt.candidate
        report = ctx.execute.gates(attempt, ctx.progress, ctx.stop_requested, ctx.hooks.gpu_bytes)
        if report.passed:
            attempt.engine.watch_every_process()  # what serves is watched, however fast it started
        facts = attempt.facts()
        timeline = start_record(facts, report.to_json(), attempt.marks)
        if timeline is not None:  # where the start's seconds went, in the journal (logfacts/timeline.py)
            ctx.progress.message(render_line(timeline), event="start.timeline")
        ctx.store.write_last_facts(
            ctx.profile, {**facts, "recorded_at": utc_now(ctx.clock), "label": candidate.label}
        )
        ctx.transitions.record(
            Event.GATES,
            status={"gates": report.to_json()},
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            passed=report.passed,
            gates=report.to_json(),
            startup_seconds=facts.get("startup_seconds"),  # vLLM's own log: its first line to ready
            timeline=timeline,
        )
        return report

    # ---- the verdict's consequences --------------------------------------------------------------------
    def promote(self, candidate: Candidate, report: ChainReport) -> None:
        self.stage.record_promotion(candidate, report.to_json())
        self.remember_rejection(candidate, None)
        self.ctx.state.promote_trial(last_good=False)
        self.stage.record_serving(
            Event.PROMOTED,
            phase=Phase.SERVING,
            status={
                "serving_profile": self.ctx.profile,
                "serving_fingerprint": candidate.fingerprint,
                "rollback_reason": None,
                "detail": candidate.label,
            },
            show={"fingerprint": candidate.fingerprint},
            ready=f"serving {candidate.label}",
            label=candidate.label,
            fingerprint=candidate.fingerprint,
        )
        self.parker.after_promotion()
        self.stage.go_live(candidate)

    def roll_back(self, rejected: Candidate, report: ChainReport | None, reason: str) -> int | None:
        """`rejected` is stopped and last-good serves instead: woken where it sleeps beside it, else
        started as recorded and gated; an exit code when nothing can be served."""
        running = self.ctx.state.newest()
        rejected_pids = running.engine.process_tree() if running is not None else []
        self.stage.stop_running("candidate rejected")
        self.ctx.transitions.record(
            Event.REJECTED, label=rejected.label, fingerprint=rejected.fingerprint, reason=reason
        )
        return self.back_to_last_good(rejected_pids, reason)

    def back_to_last_good(self, gone_pids: Sequence[int], reason: str) -> int | None:
        """Last-good serves again: woken where it sleeps (once the GPU memory of `gone_pids` is back),
        else started as recorded and gated; an exit code when nothing can be served."""
        if self.ctx.state.parked is not None and self.parker.wake_parked(gone_pids, reason):
            return None  # last-good was asleep beside it: woken and re-gated in seconds
        record = self.ctx.store.last_good_to_start(self.ctx.profile)
        if record is None:
            self.ctx.transitions.record(
                phase=Phase.FAILED,
                status={"rollback_reason": reason, "detail": "no last-good launch recorded"},
                show={"reason": reason},
            )
            return int(ExitCode.GATE_FAILED)
        return self.serve_last_good(Candidate.from_record(record), reason)

    def serve_last_good(self, last_good: Candidate, reason: str) -> int | None:
        self.ctx.transitions.record(
            Event.ROLLBACK,
            phase=Phase.ROLLING_BACK,
            status={"rollback_reason": reason},
            to=last_good.label,
            reason=reason,
        )
        report = self.start_and_gate(last_good, Phase.ROLLING_BACK)
        if report is None:
            return int(ExitCode.OK)
        if not report.passed:
            self.stage.stop_running("last-good rejected too")
            why = "last-good failed its gates too"
            self.ctx.transitions.record(Event.FAILED, phase=Phase.FAILED, status={"detail": why}, reason=why)
            return int(ExitCode.GATE_FAILED)
        self.ctx.state.promote_trial(last_good=True)
        self.stage.record_serving(
            Event.SERVING_LAST_GOOD,
            phase=Phase.SERVING_LAST_GOOD,
            status={
                "serving_profile": self.ctx.profile,
                "serving_fingerprint": last_good.fingerprint,
                "rollback_reason": reason,
            },
            show={"reason": reason},
            ready=f"serving last-good; {reason}",
            label=last_good.label,
        )
        self.stage.go_live(last_good)
        return None
