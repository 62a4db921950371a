"""Recovery: what the serve loop does with the serving watch's verdicts (launcher/watch/).

The watch runs beside whatever serves (after promotion, after a rollback, after a recovery) and
hands each change of its judgement to the stage; the serve loop passes it here (`handle`). A wedged,
failing or starving verdict is acted on once, by `supervisor.on_wedge` (`leak_monitor` for a leak):
- the evidence is kept first (an incident bundle), and the history says what failed and what is done;
- `restart`: the same launch again, gated; if the same launch was judged bad before within
  `preflight.restart_window_s` (the restart guard counts it), `rollback` instead;
- `rollback`: the launch promoted before this one (`previous_good.json`), which becomes last-good;
  with none, a restart; a restart that was already tried ends the launcher (exit 5, for systemd);
- `log`: nothing stops; `launch status` exits 3 and systemd's watchdog stops while it lasts.
"""

from __future__ import annotations

from typing import Any

from launcher.errors import BadInput, ExitCode, PreflightRefused
from launcher.profile.candidate import Candidate
from launcher.supervisor.bringup import Bringup
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event, utc_now
from launcher.supervisor.stage import Stage
from launcher.supervisor.status import Phase
from launcher.supervisor.watchdog import Watchdog
from launcher.watch.verdict import Judgement, Verdict

FINAL_EVENTS = {
    Verdict.WEDGED: Event.WEDGED,
    Verdict.FAILING: Event.FAILING,
    Verdict.STARVING: Event.STARVING,
}
MEMORY_WINDOW_S = 7200.0  # where no restart guard is wired: the declared restart_window_s


class Recovery:
    def __init__(self, ctx: Context, stage: Stage, bringup: Bringup) -> None:
        self.ctx = ctx
        self.stage = stage
        self.bringup = bringup
        self._bad_before: dict[str, list[float]] = {}  # fingerprint -> when judged bad (no guard)

    # ---- the loop's part ------------------------------------------------------------------------
    def handle(self, news: Judgement | None) -> int | None:
        """Record the watch's news; act on a final verdict. An exit code when the launcher must leave."""
        if news is None or self.ctx.state.serving is None:
            return None
        shown = {**news.to_json(), "since": utc_now(self.ctx.clock)}
        if not news.verdict.is_final:
            tell = f"{news.verdict}: {news.check}: {news.detail}" if news.check else "serving"
            self.ctx.transitions.record(Event.WATCH, status={"watch": shown}, tell=tell, **news.to_json())
            text = f"watch: {news.verdict}" + (f" ({news.check}: {news.detail})" if news.check else "")
            self.ctx.progress.message(text, event=f"watch.{news.verdict}")
            return None
        return self._act(news, shown)

    def _act(self, news: Judgement, shown: dict[str, Any]) -> int | None:
        serving = self.ctx.state.serving
        assert serving is not None
        candidate = serving.candidate
        settings = candidate.settings
        action = settings.leak_action if news.check == "memory_leak" else settings.on_wedge
        reason = f"{news.verdict} by {news.check}: {news.detail}"
        again = self._judged_bad_again(candidate, reason) if action != "log" else False
        if action == "restart" and again:
            action = "rollback"
        incident = self._keep_evidence(news, action)
        self.ctx.transitions.record(
            FINAL_EVENTS[news.verdict],
            status={"watch": shown, "detail": reason},
            tell=f"{reason}; {action}",
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            action=action,
            incident=incident,
            again_within_window=again,
            **news.to_json(),
        )
        self.ctx.progress.message(f"watch: {reason}; {action}", event=f"watch.{news.verdict}")
        if action == "log":
            return None
        self.stage.stop_watch()
        self.stage.hold_door(candidate, f"{news.verdict}: {action}")  # its requests hang or fail anyway
        with Watchdog(self.ctx.hooks.notifier, self.ctx.clock).keepalive():
            return self._recover(candidate, action, reason, restarted=again)

    def _judged_bad_again(self, candidate: Candidate, reason: str) -> bool:
        """Count this verdict against the launch; True when it was judged bad before in the window."""
        guard = self.ctx.hooks.restart_guard
        if guard is not None:
            status = guard(candidate).record_failure(candidate.fingerprint, f"watch: {reason}")
            return bool(status.failures >= 2)
        now = self.ctx.clock.monotonic()
        seen = [t for t in self._bad_before.get(candidate.fingerprint, []) if now - t < MEMORY_WINDOW_S]
        self._bad_before[candidate.fingerprint] = [*seen, now]
        return bool(seen)

    def _keep_evidence(self, news: Judgement, action: str) -> str | None:
        watch, serving = self.ctx.state.watch, self.ctx.state.serving
        if watch is None or serving is None:
            return None
        profile = self.ctx.profile
        try:
            path = watch.keep_evidence(
                self.ctx.store.incidents_dir(profile),
                profile=profile,
                label=serving.candidate.label,
                judgement=news,
                action=action,
                engine_log=self.ctx.store.engine_log(profile),
            )
        except OSError as err:
            self.ctx.progress.message(f"incident not written: {err}", event="watch.incident_failed")
            return None
        return str(path)

    # ---- acting ---------------------------------------------------------------------------------
    def _recover(self, candidate: Candidate, action: str, reason: str, *, restarted: bool) -> int | None:
        if action == "rollback":
            previous = self._previous_good(candidate)
            if previous is not None:
                self.ctx.store.write_last_good(self.ctx.profile, previous)  # what served before is good again
                return self.bringup.roll_back(candidate, None, reason)
            if restarted:
                return self._give_up(
                    candidate, f"{reason}; judged bad again and nothing was promoted before it"
                )
        return self.restart(candidate, reason)

    def restart(self, candidate: Candidate, reason: str) -> int | None:
        """The same launch again, gated; rolled back when its gates reject it now."""
        was_last_good = self.ctx.state.on_last_good
        self.stage.stop_running(f"watch: {reason}")
        try:
            report = self.bringup.start_and_gate(candidate, Phase.STARTING)
        except PreflightRefused as refused:
            return self._give_up(
                candidate, f"{reason}; the restart was refused by preflight: {refused.message}"
            )
        if report is None:
            return int(ExitCode.OK)  # stopped by a signal while restarting
        if not report.passed:
            failure = report.first_failure
            why = (
                f"{reason}; the restart was rejected by {failure.name}: {failure.summary}"
                if failure
                else reason
            )
            return self._recover(candidate, "rollback", why, restarted=True)
        self.ctx.state.promote_trial(last_good=was_last_good)
        self.stage.record_serving(
            Event.RECOVERED,
            phase=Phase.SERVING_LAST_GOOD if was_last_good else Phase.SERVING,
            status={"detail": f"restarted after {reason}"},
            show={"after": reason},
            ready=f"serving again after a restart; {reason}",
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            how="restart",
            reason=reason,
        )
        self.stage.go_live(candidate)
        return None

    def _previous_good(self, candidate: Candidate) -> dict[str, Any] | None:
        try:
            record = self.ctx.store.previous_good_to_start(self.ctx.profile)
        except BadInput:
            return None  # a corrupt record is no rollback target
        if record is None or record.get("fingerprint") == candidate.fingerprint:
            return None
        return record

    def _give_up(self, candidate: Candidate, why: str) -> int:
        self.stage.stop_running(f"watch: {why}")
        self.ctx.transitions.record(
            Event.FAILED,
            phase=Phase.FAILED,
            status={"detail": why, "engine_pid": None},
            show={"reason": why},
            reason=why,
            label=candidate.label,
        )
        return int(ExitCode.ENGINE_DIED)
