"""Park: a change tried beside a sleeping last-good (`[supervisor] park = "sleep"`, docs/park.md).

Without it every rejected change costs two cold starts: production stops, the candidate loads and
is rejected, and last-good loads again from nothing (minutes for a real model). vLLM's sleep mode
keeps the process, its CUDA graphs and compiled code, and moves the weights to host RAM (level 1):
waking takes seconds. So a reload with `park = "sleep"`:
1. puts the serving engine to sleep (`POST /sleep?level=1`), confirms `GET /is_sleeping` and, where
   NVML tells, that its GPU memory fell to the residue (its CUDA context and graph pool);
2. starts the candidate on the other port (the sleeper keeps its own: vLLM binds without
   SO_REUSEPORT), on the same GPUs — its preflight counts the sleeper's residue, and the GPU locks
   are the sleeper's, lent: two engines are never awake on one GPU set;
3. promoted: the sleeper is stopped (or kept asleep with `keep_parked`, so `launch rollback` to it
   wakes it); rejected: the candidate is stopped, its GPU memory waited for, the sleeper woken, its
   prefix cache reset, the gates that speak HTTP run again, and it serves — or, when any of that
   fails, it is stopped and last-good starts cold as before, the cause named.
When the host's RAM cannot hold the parked weights, or the serving engine was not started with
sleep mode, the reload stops it as before and says why. Lending the sleeper's GPUs to `launch
probe` is lending.py; the routes and the rules (when to park, where the candidate starts) are sleep.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psutil

from basis.setting import SettingValues
from gates.chain import ChainReport
from gates.registry import HTTP_ONLY
from launcher.host.page_cache import warm, warm_room, weight_files
from launcher.logfacts.timeline_report import WAKE, WAKE_PHASES, Stopwatch, render_line
from launcher.profile.candidate import Candidate
from launcher.profile.keys import PREFLIGHT, engine_settings
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event
from launcher.supervisor.seams import Attempt
from launcher.supervisor.sleep import (
    GIB,
    MIB,
    can_sleep,
    other_port,
    residue_problem,
    why_not_park,
)
from launcher.supervisor.stage import Stage
from launcher.supervisor.status import Phase
from launcher.supervisor.watchdog import Watchdog

MEMORY_POLL_S = 0.1  # how often the rejected candidate's GPU memory is read while it is let go


class Parker:
    def __init__(self, ctx: Context, stage: Stage) -> None:
        self.ctx = ctx
        self.stage = stage

    # ---- park ------------------------------------------------------------------------------------
    def park_for(self, candidate: Candidate) -> Candidate | None:
        """Put what serves to sleep for `candidate`; the candidate moved to the free port, or None
        (then the caller stops the serving engine as before: the reason is in the history)."""
        state = self.ctx.state
        serving = state.serving
        if serving is None and state.parked is not None:  # a sleeper already (a failed way back to it)
            port = other_port(state.parked.candidate)
            return candidate.at_port(port) if port is not None else None
        if serving is None or serving.candidate.settings.park != "sleep":
            return None
        why = why_not_park(
            serving.candidate, serving.facts().get("weights_gib"), candidate, host_available_gib
        )
        if why is not None:
            self.ctx.transitions.record(Event.PARK_SKIPPED, reason=why, label=serving.candidate.label)
            self.ctx.progress.message(f"not parked: {why}; stopping it instead", event="park.skipped")
            return None
        self.stage.drop_parked("a newer engine is parked")  # one sleeper at a time (keep_parked)
        port = other_port(serving.candidate)
        assert port is not None
        self.stage.stop_watch()
        if not self.sleep(serving):
            return None
        state.park_serving()
        return candidate.at_port(port)

    def destination(self, candidate: Candidate, *, beside: bool) -> Candidate:
        """Where `candidate` will start: on the second port when what serves stays on its own
        (parked for it, or tried beside it), else where the profile puts it. Judged before anything
        changes, so that a port held there refuses the change while what serves still serves."""
        serving = self.ctx.state.serving
        port = other_port(serving.candidate) if serving is not None else None
        if serving is None or port is None or candidate.home_port != serving.candidate.home_port:
            return candidate
        if beside or self._would_park(serving, candidate):
            return candidate.at_port(port)
        return candidate

    @staticmethod
    def _would_park(serving: Attempt, candidate: Candidate) -> bool:
        if serving.candidate.settings.park != "sleep":
            return False
        weights = serving.facts().get("weights_gib")
        return why_not_park(serving.candidate, weights, candidate, host_available_gib) is None

    def park_bytes(self, candidate: Candidate) -> int:
        """Host RAM a park for `candidate` will pin: the serving engine's weights when it would sleep."""
        serving = self.ctx.state.serving
        if serving is None or not self._would_park(serving, candidate):
            return 0
        weights = serving.facts().get("weights_gib")
        return int(float(weights) * GIB) if isinstance(weights, int | float) else 0

    def read_ahead(self, candidate: Candidate) -> dict[str, Any] | None:
        """Before what serves is parked or stopped for `candidate`: its weight files read into the
        page cache while production still serves (`[supervisor] warm_weights`, docs/park.md), only
        where host RAM holds them beside what this park will pin, bounded by
        `warm_weights_timeout_s` (the reading: launcher/host/page_cache.py). The figure for the
        history (files, bytes, seconds, GB/s) or `skipped` with the reason; None when nothing
        serves (no outage to shorten)."""
        if self.ctx.state.serving is None:
            return None
        if not candidate.settings.warm_weights:
            return {"skipped": "warm_weights = false"}
        found = weight_files(engine_settings(candidate.profile_data).optional_text("model"))
        if isinstance(found, str):
            return {"skipped": found}
        floor = SettingValues.of(PREFLIGHT, candidate.profile_data.get("preflight")).number(
            "min_host_available_gib"
        )
        park = self.park_bytes(candidate)
        why = warm_room(found.total_bytes, psutil.virtual_memory().available, park, floor)
        if why is not None:
            self.ctx.progress.message(f"weights not read ahead: {why}", event="warm.skipped")
            return {"skipped": why, "files": len(found.files), "total_bytes": found.total_bytes}
        self.ctx.progress.message(
            f"reading {found.total_bytes / GIB:.2f} GiB of weights ({len(found.files)} files) into the "
            "page cache while production serves",
            event="warm.start",
        )
        clock = self.ctx.clock
        with Watchdog(self.ctx.hooks.notifier, clock).keepalive():
            done = warm(found, clock, clock.monotonic() + candidate.settings.warm_weights_timeout_s)
        rate = f" ({done.gb_per_s:g} GB/s)" if done.gb_per_s is not None else ""
        cut = "" if done.complete else f", cut at warm_weights_timeout_s of {found.total_bytes / GIB:.2f} GiB"
        self.ctx.progress.message(
            f"weights read ahead: {done.bytes / GIB:.2f} GiB in {done.seconds:.1f} s{rate}{cut}",
            event="warm.done",
            **done.as_record(),
        )
        return done.as_record()

    def sleep(self, serving: Attempt) -> bool:
        """Put `serving` to sleep and confirm it (the route, then NVML where it tells); a failed sleep is
        recorded and the engine woken, best effort: it is stopped next either way."""
        clock = self.ctx.clock
        settings = serving.candidate.settings
        control = self.ctx.execute.sleep(serving.candidate, clock)
        pids = serving.engine.process_tree()
        awake_bytes = self.gpu_bytes(pids)
        started = clock.monotonic()
        why = control.sleep(settings.wake_timeout_s)
        if why is None and control.is_sleeping(settings.wake_timeout_s) is not True:
            why = "/is_sleeping does not say it sleeps"
        asleep_bytes = self.gpu_bytes(pids)
        if why is None:
            why = residue_problem(awake_bytes, asleep_bytes)
        seconds = round(clock.monotonic() - started, 3)
        label = serving.candidate.label
        if why is not None:
            self.ctx.transitions.record(
                Event.PARK_SKIPPED, reason=f"sleep failed: {why}", seconds=seconds, label=label
            )
            control.wake(settings.wake_timeout_s)
            return False
        serving.slept += 1
        self.ctx.transitions.record(
            Event.PARKED,
            first=serving.slept == 1,  # the first sleep pins host buffers: it costs more than later ones
            label=label,
            fingerprint=serving.candidate.fingerprint,
            port=serving.candidate.port,
            seconds=seconds,
            gpu_mib_awake=None if awake_bytes is None else round(awake_bytes / MIB),
            gpu_mib_asleep=None if asleep_bytes is None else round(asleep_bytes / MIB),
            host_available_gib=round(host_available_gib(), 2),
        )
        self.ctx.progress.message(f"parked {label} asleep in {seconds:.2f} s", event="park.parked")
        return True

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        measure = self.ctx.hooks.gpu_bytes
        return measure(pids) if measure is not None and pids else None

    def parked_pids(self) -> frozenset[int]:
        parked = self.ctx.state.parked
        return frozenset(parked.engine.process_tree()) if parked is not None else frozenset()

    # ---- after the candidate's verdict ----------------------------------------------------------
    def after_promotion(self) -> None:
        """The promoted candidate serves: it takes over the sleeper's GPU locks; the sleeper goes,
        unless `keep_parked` keeps it for a rollback in seconds."""
        parked, serving = self.ctx.state.parked, self.ctx.state.serving
        if parked is None or serving is None:
            return
        serving.held.enter_context(parked.held.pop_all())  # the locks stay held across the handover
        if not parked.candidate.settings.keep_parked:
            self.stage.drop_parked("the candidate was promoted")

    def wake_parked(self, rejected_pids: Sequence[int], reason: str) -> bool:
        """The candidate was rejected (and stopped): wake the sleeper, re-gate it, serve it."""
        parked = self.ctx.state.take_parked()
        if parked is None:
            return False
        why, report, watch = self.wake_and_regate(parked, rejected_pids)
        if why is not None:
            self.ctx.progress.message(f"wake failed: {why}; last-good starts cold", event="park.wake_failed")
            parked.stop(grace_s=parked.candidate.settings.stop_grace_s)
            return False
        self.ctx.state.serve(parked, last_good=True)
        self.stage.record_serving(
            Event.WOKEN,
            phase=Phase.SERVING_LAST_GOOD,
            status={
                "serving_fingerprint": parked.candidate.fingerprint,
                "rollback_reason": reason,
                "engine_pid": parked.engine.pid,
                "gates": report.to_json() if report else [],
            },
            show={"reason": reason},
            ready=f"serving last-good, woken; {reason}",
            label=parked.candidate.label,
            **watch.as_record(),  # its seconds, and where they went (as a cold start keeps its own)
            port=parked.candidate.port,
        )
        self.stage.go_live(parked.candidate)
        return True

    def wake_and_regate(
        self, sleeper: Attempt, gone_pids: Sequence[int]
    ) -> tuple[str | None, ChainReport | None, Stopwatch]:
        """Wake `sleeper` and run its gates that speak HTTP again: (why that failed, else None; the
        gates' report; its phases on the clock, WAKE_PHASES). A failure is recorded (`wake_failed`,
        with the phases it got through); the caller decides what follows."""
        watch = Stopwatch(self.ctx.clock.monotonic, WAKE, WAKE_PHASES)
        why = self._wake(sleeper, gone_pids, watch)
        report: ChainReport | None = None
        if why is None:
            report = self.ctx.execute.gates(
                sleeper,
                self.ctx.progress,
                lambda: False,
                self.ctx.hooks.gpu_bytes,
                only=HTTP_ONLY,  # what a woken engine is judged by: its gates that speak HTTP
            )
            watch.lap("gates")
            self.ctx.progress.message(render_line(watch.timeline() or {}), event="wake.timeline")
            failure = report.first_failure
            why = f"re-gate: {failure.name}: {failure.summary}" if failure is not None else None
        if why is not None:
            self.ctx.transitions.record(
                Event.WAKE_FAILED, label=sleeper.candidate.label, reason=why, **watch.as_record()
            )
        return why, report, watch

    def _wake(self, parked: Attempt, rejected_pids: Sequence[int], watch: Stopwatch) -> str | None:
        settings = parked.candidate.settings
        if parked.engine.exited.is_set():
            return f"the parked engine is gone: {parked.engine.exit_description()}"
        clock = self.ctx.clock
        deadline = clock.monotonic() + settings.wake_timeout_s
        while (self.gpu_bytes(rejected_pids) or 0) > 0 and clock.monotonic() < deadline:
            clock.sleep(MEMORY_POLL_S)  # the candidate's memory must be back before the sleeper takes its own
        watch.lap("wait_memory")
        control = self.ctx.execute.sleep(parked.candidate, clock)
        why = control.wake(settings.wake_timeout_s)
        watch.lap("wake_up")
        if why is not None:
            return why
        if control.is_sleeping(settings.wake_timeout_s) is not False:
            why = "/is_sleeping does not say it is awake"
        if why is None:
            why = control.reset_prefix_cache(settings.wake_timeout_s)  # a stale cache answered garbage
        if why is None:
            why = self._same_answer(parked, control.greedy(settings.wake_timeout_s))
        watch.lap("checks")
        return why

    @staticmethod
    def _same_answer(woken: Attempt, answer: tuple[str | None, str | None]) -> str | None:
        """A woken engine must answer the greedy prompt as it did before it slept (vLLM's known faults:
        garbage after a wake, issues 16234 and 17103); why not, or None."""
        text, problem = answer
        if problem is not None:
            return f"the greedy check: {problem}"
        if woken.greedy is not None and text != woken.greedy:
            return f"it answers the greedy prompt otherwise after the wake: {woken.greedy!r} then {text!r}"
        return None

    # ---- back to the engine kept asleep (`keep_parked`: `launch rollback` in seconds) ---------------
    def back_to_parked(self, candidate: Candidate) -> bool:
        """The change asks for the launch that sleeps beside what serves: wake it instead of a start.
        What serves goes to sleep in its place (or stops), and hands over its GPU locks. False when
        nothing sleeps with that launch, or its wake failed (then the caller starts the candidate)."""
        state = self.ctx.state
        parked, serving = state.parked, state.serving
        if parked is None or serving is None or not parked.candidate.same_launch(candidate):
            return False
        self.stage.stop_watch()
        pids = serving.engine.process_tree()
        locks = serving.held.pop_all()
        state.take_parked()
        if serving.candidate.settings.keep_parked and can_sleep(serving.candidate) and self.sleep(serving):
            state.park_serving()
            pids = []
        else:
            self.stage.stop_running(f"back to the parked {parked.candidate.label}")
        parked.held.enter_context(locks)
        state.serve(parked, last_good=False)
        return self._serve_woken(parked, pids)

    def _serve_woken(self, woken: Attempt, gone_pids: Sequence[int]) -> bool:
        why, _, watch = self.wake_and_regate(woken, gone_pids)
        if why is not None:
            self.stage.stop_running(f"its wake failed: {why}")
            return False
        self.stage.record_promotion(woken.candidate, None)
        self.stage.record_serving(
            Event.WOKEN,
            phase=Phase.SERVING,
            status={
                "serving_fingerprint": woken.candidate.fingerprint,
                "rollback_reason": None,
                "engine_pid": woken.engine.pid,
                "detail": woken.candidate.label,
            },
            show={"fingerprint": woken.candidate.fingerprint},
            ready=f"serving {woken.candidate.label}, woken",
            label=woken.candidate.label,
            **watch.as_record(),
            port=woken.candidate.port,
            why="back to the parked launch",
        )
        self.stage.go_live(woken.candidate)
        return True


def host_available_gib() -> float:
    return float(psutil.virtual_memory().available) / GIB
