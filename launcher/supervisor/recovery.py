"""What the serve loop does with the serving watch's verdicts (launcher/watch/).

The watch runs beside whatever serves (after promotion, after a rollback, after a recovery) and
hands each change of its judgement to the loop (`_on_watch_change`, from its threads; the loop
records it). A wedged, failing or starving verdict is acted on once, by `supervisor.on_wedge`
(`leak_monitor` for a leak):
- the evidence is kept first (an incident bundle), and the history says what failed and what is done;
- `restart`: the same launch again, gated; if the same launch was judged bad before within
  `preflight.restart_window_s` (the restart guard counts it), `rollback` instead;
- `rollback`: the launch promoted before this one (`previous_good.json`), which becomes last-good;
  with none, a restart; a restart that was already tried ends the launcher (exit 5, for systemd);
- `log`: nothing stops; `launch status` exits 3 and systemd's watchdog stops while it lasts.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from launcher.errors import BadInput, ExitCode, PreflightRefused
from launcher.profile.candidate import Candidate
from launcher.supervisor.history import Event, utc_now
from launcher.supervisor.status import Phase
from launcher.supervisor.watchdog import Watchdog
from launcher.watch.verdict import Judgement, Verdict

if TYPE_CHECKING:
    from gates.chain import ChainReport
    from launcher.state.store import StateStore
    from launcher.supervisor.progress import Progress
    from launcher.supervisor.seams import Attempt, Hooks, WatchHandle
    from launcher.supervisor.status import Transitions

FINAL_EVENTS = {
    Verdict.WEDGED: Event.WEDGED,
    Verdict.FAILING: Event.FAILING,
    Verdict.STARVING: Event.STARVING,
}
MEMORY_WINDOW_S = 7200.0  # where no restart guard is wired: the declared restart_window_s


class Watching:
    """The watch half of `service.Supervisor` (which provides these attributes and methods)."""

    profile: str
    hooks: Hooks
    store: StateStore
    transitions: Transitions
    progress: Progress
    current: Attempt | None
    serving_last_good: bool
    wake: threading.Event
    _stop_lock: threading.RLock

    if TYPE_CHECKING:  # provided by service.Supervisor and the other halves; a stub here would shadow them

        def _stop_current(self, why: str) -> None: ...

        def _start_and_gate(self, candidate: Candidate, phase: Phase) -> ChainReport | None: ...

        def _roll_back(self, rejected: Candidate, report: ChainReport | None, reason: str) -> int | None: ...

        def _switched(self, serving: Candidate) -> None: ...

    def _init_watching(self) -> None:
        self.watch: WatchHandle | None = None
        self._watch_news: Judgement | None = None
        self._news_lock = threading.Lock()
        self._bad_before: dict[str, list[float]] = {}  # fingerprint -> when judged bad (no guard)

    # ---- the watch beside what serves --------------------------------------------------------
    def _start_watch(self) -> None:
        """Watch what serves now; under the stop lock, so a stop from the signal helper thread
        either comes first (nothing serves: no watch) or stops this watch with the engine. The
        transition that began serving already showed the watch (`_fresh_watch`)."""
        with self._stop_lock:
            self._stop_watch()
            attempt = self.current
            if attempt is None or self.hooks.watch is None or not attempt.candidate.settings.watch:
                return
            watch = self.hooks.watch(attempt.candidate, attempt.engine, self._on_watch_change)
            self.watch = watch
            watch.start()

    def _fresh_watch(self) -> dict[str, Any]:
        """The status's `watch` as serving begins: a fresh verdict when a watch will run, else none
        (a recorded verdict of an engine that is gone must not stay)."""
        attempt = self.current
        if attempt is None or self.hooks.watch is None or not attempt.candidate.settings.watch:
            return {"watch": None}
        return {"watch": {**Judgement(Verdict.SERVING).to_json(), "since": utc_now()}}

    def _stop_watch(self) -> None:
        watch, self.watch = self.watch, None
        if watch is not None:
            watch.stop()
        with self._news_lock:
            self._watch_news = None

    def _on_watch_change(self, judgement: Judgement) -> None:
        """Called from the watch's threads: hand the news over, the loop records it."""
        with self._news_lock:
            self._watch_news = judgement
        self.wake.set()

    def watch_serves(self) -> bool:
        """What systemd's watchdog pings on: the watch's verdict (no watch: True)."""
        return self.watch is None or self.watch.judgement.verdict.serves

    # ---- the loop's part ------------------------------------------------------------------------
    def _handle_watch_news(self) -> int | None:
        with self._news_lock:
            news, self._watch_news = self._watch_news, None
        if news is None or self.watch is None or self.current is None:
            return None
        shown = {**news.to_json(), "since": utc_now()}
        if not news.verdict.is_final:
            tell = f"{news.verdict}: {news.check}: {news.detail}" if news.check else "serving"
            self.transitions.record(Event.WATCH, status={"watch": shown}, tell=tell, **news.to_json())
            text = f"watch: {news.verdict}" + (f" ({news.check}: {news.detail})" if news.check else "")
            self.progress.message(text, event=f"watch.{news.verdict}")
            return None
        return self._act(news, shown)

    def _act(self, news: Judgement, shown: dict[str, Any]) -> int | None:
        assert self.current is not None and self.watch is not None
        candidate = self.current.candidate
        settings = candidate.settings
        action = settings.leak_action if news.check == "memory_leak" else settings.on_wedge
        reason = f"{news.verdict} by {news.check}: {news.detail}"
        again = self._judged_bad_again(candidate, reason) if action != "log" else False
        if action == "restart" and again:
            action = "rollback"
        incident = self._keep_evidence(news, action)
        self.transitions.record(
            FINAL_EVENTS[news.verdict], status={"watch": shown, "detail": reason}, tell=f"{reason}; {action}",
            label=candidate.label, fingerprint=candidate.fingerprint, action=action, incident=incident,
            again_within_window=again, **news.to_json(),
        )  # fmt: skip
        self.progress.message(f"watch: {reason}; {action}", event=f"watch.{news.verdict}")
        if action == "log":
            return None
        self._stop_watch()
        with Watchdog(self.hooks.notifier).keepalive():
            return self._recover(candidate, action, reason, restarted=again)

    def _judged_bad_again(self, candidate: Candidate, reason: str) -> bool:
        """Count this verdict against the launch; True when it was judged bad before in the window."""
        if self.hooks.restart_guard is not None:
            status = self.hooks.restart_guard(candidate).record_failure(
                candidate.fingerprint, f"watch: {reason}"
            )
            return bool(status.failures >= 2)
        now = time.monotonic()
        seen = [t for t in self._bad_before.get(candidate.fingerprint, []) if now - t < MEMORY_WINDOW_S]
        self._bad_before[candidate.fingerprint] = [*seen, now]
        return bool(seen)

    def _keep_evidence(self, news: Judgement, action: str) -> str | None:
        assert self.watch is not None and self.current is not None
        try:
            path = self.watch.keep_evidence(
                self.store.incidents_dir(self.profile), profile=self.profile,
                label=self.current.candidate.label, judgement=news, action=action,
                engine_log=self.store.engine_log(self.profile),
            )  # fmt: skip
        except OSError as err:
            self.progress.message(f"incident not written: {err}", event="watch.incident_failed")
            return None
        return str(path)

    # ---- acting ---------------------------------------------------------------------------------
    def _recover(self, candidate: Candidate, action: str, reason: str, *, restarted: bool) -> int | None:
        if action == "rollback":
            previous = self._previous_good(candidate)
            if previous is not None:
                self.store.write_last_good(self.profile, previous)  # what served before is good again
                return self._roll_back(candidate, None, reason)
            if restarted:
                return self._give_up(
                    candidate, f"{reason}; judged bad again and nothing was promoted before it"
                )
        return self._restart(candidate, reason)

    def _restart(self, candidate: Candidate, reason: str) -> int | None:
        was_last_good = self.serving_last_good
        self._stop_current(f"watch: {reason}")
        try:
            report = self._start_and_gate(candidate, Phase.STARTING)
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
        phase = Phase.SERVING_LAST_GOOD if was_last_good else Phase.SERVING
        self.transitions.record(
            Event.RECOVERED, phase=phase,
            status={"detail": f"restarted after {reason}", **self._fresh_watch()},
            show={"after": reason}, ready=f"serving again after a restart; {reason}",
            label=candidate.label, fingerprint=candidate.fingerprint, how="restart", reason=reason,
        )  # fmt: skip
        self._switched(candidate)
        self._start_watch()
        return None

    def _previous_good(self, candidate: Candidate) -> dict[str, Any] | None:
        try:
            record = self.store.previous_good_to_start(self.profile)
        except BadInput:
            return None  # a corrupt record is no rollback target
        if record is None or record.get("fingerprint") == candidate.fingerprint:
            return None
        return record

    def _give_up(self, candidate: Candidate, why: str) -> int:
        self._stop_current(f"watch: {why}")
        self.transitions.record(Event.FAILED, phase=Phase.FAILED, status={"detail": why, "engine_pid": None},
                                show={"reason": why}, reason=why, label=candidate.label)  # fmt: skip
        return int(ExitCode.ENGINE_DIED)
