"""The stage: what every collaborator does to the engines on it — stop what runs, drop the sleeper,
put an engine on as what serves (recorded, the front door pointed at it, the serving watch started),
hold clients' requests at the front door and drain an engine before it is parked or stopped — in one
place, so that each change of the serving state is followed by the same effects in the same order.

Stops hold one lock from taking the engine out of the record until its whole group is gone and the
stop is recorded: the signal helper thread and the serve loop may both stop what runs, and the
second must find it stopped, not half-stopped. The watch starts under the same lock, so a stop from
the helper either comes first (nothing serves: no watch) or stops this watch with its engine.
"""

from __future__ import annotations

import threading
from typing import Any

from launcher.errors import BadInput
from launcher.profile.candidate import Candidate
from launcher.profile.keys import frontdoor_settings
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event, utc_now
from launcher.supervisor.seams import Attempt, FrontDoor
from launcher.supervisor.sleep import run_switch, switch_argv
from launcher.supervisor.status import Phase
from launcher.watch.verdict import Judgement, Verdict


class Stage:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._stop_lock = threading.RLock()
        self._news: Judgement | None = None  # the watch's latest change, for the serve loop
        self._news_lock = threading.Lock()

    # ---- stopping --------------------------------------------------------------------------------
    def stop_running(self, why: str) -> None:
        """Stop the trial and what serves (the sleeper stays), each recorded with `why`."""
        with self._stop_lock:
            self.stop_watch()  # what is stopped now is no news
            for attempt in self.ctx.state.take_running():
                self.stop(attempt, why)

    def drop_parked(self, why: str) -> None:
        """Stop the engine asleep beside what serves, if any."""
        parked = self.ctx.state.take_parked()
        if parked is not None:
            self.stop(parked, f"parked engine: {why}")

    def stop(self, attempt: Attempt, why: str) -> None:
        """End `attempt`'s whole group (TERM, grace, KILL) and record how it went."""
        report = attempt.stop(grace_s=attempt.candidate.settings.stop_grace_s)
        self.ctx.transitions.record(
            Event.ENGINE_STOPPED,
            label=attempt.candidate.label,
            why=why,
            graceful=report.graceful,
            killed=report.killed,
            leftovers=list(report.leftovers),
            seconds=round(report.seconds, 3),
        )

    # ---- what serves -----------------------------------------------------------------------------
    def record_serving(self, event: Event, *, phase: Phase, status: dict[str, Any], **fields: Any) -> None:
        """Record that what the serving state holds as serving now serves: `event` in the history,
        `phase` and `status` on the board with a fresh watch verdict (an old one must not stay)."""
        self.ctx.transitions.record(event, phase=phase, status={**status, **self.fresh_watch()}, **fields)

    def go_live(self, serving: Candidate) -> None:
        """`serving` is told to the front door and the proxy hook, and watched (unless a stop took it
        meanwhile). A profile that parks first records what it answers the greedy prompt: a wake must
        answer the same before clients are let in again."""
        attempt = self.ctx.state.serving
        if attempt is not None and attempt.candidate is serving and serving.settings.park == "sleep":
            self._remember_greedy(attempt)
        self.switched(serving)
        self.start_watch()

    def _remember_greedy(self, attempt: Attempt) -> None:
        if attempt.greedy is not None:
            return  # the same engine, serving again: its first answer stays the reference
        timeout_s = attempt.candidate.settings.wake_timeout_s
        text, problem = self.ctx.execute.sleep(attempt.candidate, self.ctx.clock).greedy(timeout_s)
        attempt.greedy = text
        self.ctx.transitions.record(
            Event.GREEDY_REFERENCE, label=attempt.candidate.label, text=text, problem=problem
        )

    def record_promotion(self, candidate: Candidate, gates: list[dict[str, Any]] | None) -> None:
        """`candidate` is last-good now; the launch promoted before it stays on record
        (`previous_good.json`), so a rollback after a wedge can start it."""
        try:
            old = self.ctx.store.last_good_to_start(self.ctx.profile)
        except BadInput:
            old = None  # a corrupt record is no rollback target
        if old is not None and old.get("fingerprint") != candidate.fingerprint:
            self.ctx.store.write_previous_good(self.ctx.profile, old)
        record = {**candidate.to_record(), "promoted_at": utc_now(self.ctx.clock)}
        if gates is not None:
            record["gates"] = gates
        self.ctx.store.write_last_good(self.ctx.profile, record)

    def switched(self, serving: Candidate) -> None:
        """What serves moved (or may have): the front door sends clients to it, and `on_switch` runs
        with its address (docs/frontdoor.md, docs/park.md)."""
        self.ctx.state.pointed(serving.port)
        door = self.front_door(serving)
        problem = door.point_at(serving.port) if door is not None else None
        argv = switch_argv(serving)
        code, output = run_switch(argv) if argv is not None else (None, "")
        if door is None and argv is None:
            return
        fields: dict[str, Any] = {"port": serving.port, "label": serving.label}
        if door is not None:
            fields |= {"door": door.url, "door_problem": problem}
        if argv is not None:
            fields |= {"argv": argv, "exit_code": code, "output": output}
        status = {"frontdoor_url": door.url} if door is not None else None
        self.ctx.transitions.record(Event.SWITCHED, status=status, **fields)
        if problem is not None:
            self.ctx.progress.message(f"front door not pointed: {problem}", event="park.switch_failed")
        if argv is not None and code != 0:
            self.ctx.progress.message(f"on_switch exited {code}: {output}", event="park.switch_failed")

    # ---- the front door --------------------------------------------------------------------------
    def front_door(self, candidate: Candidate) -> FrontDoor | None:
        make = self.ctx.hooks.front_door
        return make(candidate) if make is not None else None

    def hold_door(self, candidate: Candidate, why: str) -> FrontDoor | None:
        """New requests wait at the front door (up to its hold_s) instead of reaching an engine that
        is about to stop, sleep or restart; the door, or None when the profile has none."""
        door = self.front_door(candidate)
        if door is None:
            return None
        problem = door.point_at(None)
        self.ctx.state.pointed(None)
        self.ctx.transitions.record(Event.SWITCHED, port=None, door=door.url, door_problem=problem, why=why)
        if problem is not None:
            self.ctx.progress.message(f"front door not told to hold: {problem}", event="park.switch_failed")
        return door

    def drain(self, attempt: Attempt, why: str) -> None:
        """Hold new requests at the front door, then wait until the requests in flight on `attempt`
        ended, at most `[frontdoor] drain_timeout_s`: what is still running then is cut by the stop
        or the sleep that follows, and counted (history `drained`, the progress line)."""
        candidate = attempt.candidate
        door = self.hold_door(candidate, why)
        if door is None:
            return
        timeout_s = frontdoor_settings(candidate.profile_data).drain_timeout_s
        report = door.drain(candidate.port, timeout_s)
        self.ctx.transitions.record(
            Event.DRAINED,
            label=candidate.label,
            port=report.port,
            left=report.left,
            waited_s=report.waited_s,
            timeout_s=timeout_s,
            problem=report.problem,
        )
        if report.left:
            text = f"{report.left} request(s) still in flight after {timeout_s:g} s: cut by the {why}"
            self.ctx.progress.message(text, event="frontdoor.cut", left=report.left)
            return
        said = "nothing left in flight" if report.left == 0 else f"in flight unknown ({report.problem})"
        self.ctx.progress.message(f"drained in {report.waited_s:.1f} s: {said}", event="frontdoor.drained")

    # ---- the serving watch -----------------------------------------------------------------------
    def start_watch(self) -> None:
        """Watch what serves now (a watch already running is stopped first)."""
        with self._stop_lock:
            self.stop_watch()
            attempt = self.ctx.state.serving
            make = self.ctx.hooks.watch
            if attempt is None or make is None or not attempt.candidate.settings.watch:
                return
            watch = make(attempt.candidate, attempt.engine, self.on_watch_change)
            self.ctx.state.set_watch(watch)
            watch.start()

    def stop_watch(self) -> None:
        watch = self.ctx.state.take_watch()
        if watch is not None:
            watch.stop()
        with self._news_lock:
            self._news = None

    def fresh_watch(self) -> dict[str, Any]:
        """The status's `watch` as serving begins: a fresh verdict when a watch will run, else none."""
        attempt = self.ctx.state.serving
        if attempt is None or self.ctx.hooks.watch is None or not attempt.candidate.settings.watch:
            return {"watch": None}
        return {"watch": {**Judgement(Verdict.SERVING).to_json(), "since": utc_now(self.ctx.clock)}}

    def on_watch_change(self, judgement: Judgement) -> None:
        """Called from the watch's threads: hand the news over, the serve loop acts on it."""
        with self._news_lock:
            self._news = judgement
        self.ctx.wake.set()

    def take_news(self) -> Judgement | None:
        with self._news_lock:
            news, self._news = self._news, None
        if self.ctx.state.watch is None or self.ctx.state.serving is None:
            return None  # news of a watch that was stopped since
        return news

    def watch_serves(self) -> bool:
        """What systemd's watchdog pings on: the watch's verdict (no watch: True)."""
        watch = self.ctx.state.watch
        return watch is None or watch.judgement.verdict.serves
