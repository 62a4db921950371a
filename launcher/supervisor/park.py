"""The park half of the supervisor: a change tried beside a sleeping last-good (`[supervisor] park =
"sleep"`, docs/park.md), and the serving engine lent, asleep, to `launch probe`'s arms.

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
sleep mode, the reload stops it as before and says why. Lent to a probe (`_lend`), the sleeper's GPU
locks go to the arms; it wakes when the probe asks (`_take_back`) or is gone (`_lender_gone`). The
routes and the rules (when to park, where the candidate starts) are sleep.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psutil

from launcher.errors import ExitCode, PreflightRefused
from launcher.profile.candidate import Candidate
from launcher.supervisor import reload_requests
from launcher.supervisor.history import Event, utc_now
from launcher.supervisor.reload_requests import Action, ControlRequest, Outcome, Verdict
from launcher.supervisor.sleep import (
    GIB,
    HTTP_GATES,
    MIB,
    can_sleep,
    other_port,
    residue_problem,
    run_switch,
    switch_argv,
    why_not_lend,
    why_not_park,
)
from launcher.supervisor.status import Phase

if TYPE_CHECKING:
    from gates.chain import ChainReport
    from launcher.state.store import StateStore
    from launcher.supervisor.progress import Progress
    from launcher.supervisor.seams import Attempt, Execute, Hooks
    from launcher.supervisor.status import Transitions


class Parking:
    """The park half of `service.Supervisor` (which provides these attributes and methods)."""

    profile: str
    hooks: Hooks
    execute: Execute
    store: StateStore
    transitions: Transitions
    progress: Progress
    current: Attempt | None
    serving_last_good: bool
    _stop_lock: threading.RLock

    if TYPE_CHECKING:  # provided by service.Supervisor and the other halves; a stub here would shadow them

        def _stop_watch(self) -> None: ...

        def _start_watch(self) -> None: ...

        def _stop_current(self, why: str) -> None: ...

        def _restart(self, candidate: Candidate, reason: str) -> int | None: ...

        def _fresh_watch(self) -> dict[str, Any]: ...

        def _keep_previous_good(self, candidate: Candidate) -> None: ...

    def _init_parking(self) -> None:
        self.parked: Attempt | None = None
        self.lent_to: int | None = (
            None  # the pid of the `launch probe` the sleeping engine's GPUs are lent to
        )

    # ---- park ------------------------------------------------------------------------------------
    def _park_for(self, candidate: Candidate) -> Candidate | None:
        """Put what serves to sleep for `candidate`; the candidate moved to the free port, or None
        (then the caller stops the serving engine as before: the reason is in the history)."""
        serving = self.current
        if serving is None and self.parked is not None:  # a sleeper already (a failed way back to it)
            port = other_port(self.parked.candidate)
            return candidate.at_port(port) if port is not None else None
        if serving is None or serving.candidate.settings.park != "sleep":
            return None
        why = why_not_park(
            serving.candidate, serving.facts().get("weights_gib"), candidate, _host_available_gib
        )
        if why is not None:
            self.transitions.record(Event.PARK_SKIPPED, reason=why, label=serving.candidate.label)
            self.progress.message(f"not parked: {why}; stopping it instead", event="park.skipped")
            return None
        self._drop_parked("a newer engine is parked")  # one sleeper at a time (keep_parked)
        port = other_port(serving.candidate)
        assert port is not None
        self._stop_watch()
        if not self._sleep(serving):
            return None
        with self._stop_lock:
            self.parked, self.current = serving, None
        return candidate.at_port(port)

    def _sleep(self, serving: Attempt) -> bool:
        """Put `serving` to sleep and confirm it (the route, then NVML where it tells); a failed sleep is
        recorded and the engine woken, best effort: it is stopped next either way."""
        settings = serving.candidate.settings
        control = self.execute.sleep(serving.candidate)
        pids = serving.engine.process_tree()
        awake_bytes = self._gpu_bytes(pids)
        started = time.monotonic()
        why = control.sleep(settings.wake_timeout_s)
        if why is None and control.is_sleeping(settings.wake_timeout_s) is not True:
            why = "/is_sleeping does not say it sleeps"
        asleep_bytes = self._gpu_bytes(pids)
        if why is None:
            why = residue_problem(awake_bytes, asleep_bytes)
        seconds = round(time.monotonic() - started, 3)
        if why is not None:
            self.transitions.record(Event.PARK_SKIPPED, reason=f"sleep failed: {why}", seconds=seconds,
                                    label=serving.candidate.label)  # fmt: skip
            control.wake(settings.wake_timeout_s)
            return False
        self.transitions.record(
            Event.PARKED, label=serving.candidate.label, fingerprint=serving.candidate.fingerprint,
            port=serving.candidate.port, seconds=seconds,
            gpu_mib_awake=None if awake_bytes is None else round(awake_bytes / MIB),
            gpu_mib_asleep=None if asleep_bytes is None else round(asleep_bytes / MIB),
            host_available_gib=round(_host_available_gib(), 2),
        )  # fmt: skip
        self.progress.message(
            f"parked {serving.candidate.label} asleep in {seconds:.2f} s", event="park.parked"
        )
        return True

    def _gpu_bytes(self, pids: Sequence[int]) -> int | None:
        return self.hooks.gpu_bytes(pids) if self.hooks.gpu_bytes is not None and pids else None

    def _parked_pids(self) -> frozenset[int]:
        return frozenset(self.parked.engine.process_tree()) if self.parked is not None else frozenset()

    # ---- after the candidate's verdict ----------------------------------------------------------
    def _after_promotion(self) -> None:
        """The promoted candidate serves: it takes over the sleeper's GPU locks; the sleeper goes,
        unless `keep_parked` keeps it for a rollback in seconds."""
        parked, current = self.parked, self.current
        if parked is None or current is None:
            return
        current.held.enter_context(parked.held.pop_all())  # the locks stay held across the handover
        if not parked.candidate.settings.keep_parked:
            self._drop_parked("the candidate was promoted")

    def _drop_parked(self, why: str) -> None:
        with self._stop_lock:
            parked, self.parked = self.parked, None
        if parked is None:
            return
        report = parked.stop(grace_s=parked.candidate.settings.stop_grace_s)
        self.transitions.record(
            Event.ENGINE_STOPPED, label=parked.candidate.label, why=f"parked engine: {why}",
            graceful=report.graceful, killed=report.killed, leftovers=list(report.leftovers),
            seconds=round(report.seconds, 3),
        )  # fmt: skip

    def _wake_parked(self, rejected_pids: Sequence[int], reason: str) -> bool:
        """The candidate was rejected (and stopped): wake the sleeper, re-gate it, serve it."""
        with self._stop_lock:
            parked, self.parked = self.parked, None
        if parked is None:
            return False
        why, report, seconds = self._wake_and_regate(parked, rejected_pids)
        if why is not None:
            self.progress.message(f"wake failed: {why}; last-good starts cold", event="park.wake_failed")
            parked.stop(grace_s=parked.candidate.settings.stop_grace_s)
            return False
        with self._stop_lock:
            self.current = parked
        self.serving_last_good = True
        self.transitions.record(
            Event.WOKEN, phase=Phase.SERVING_LAST_GOOD,
            status={"serving_fingerprint": parked.candidate.fingerprint, "rollback_reason": reason,
                    "engine_pid": parked.engine.pid, "gates": report.to_json() if report else [],
                    **self._fresh_watch()},
            show={"reason": reason}, ready=f"serving last-good, woken; {reason}",
            label=parked.candidate.label, seconds=seconds, port=parked.candidate.port,
        )  # fmt: skip
        self._switched(parked.candidate)
        self._start_watch()
        return True

    def _wake_and_regate(
        self, sleeper: Attempt, gone_pids: Sequence[int]
    ) -> tuple[str | None, ChainReport | None, float]:
        """Wake `sleeper` and run its gates that speak HTTP again: (why that failed, else None; the
        gates' report; seconds). A failure is recorded (`wake_failed`); the caller decides what follows."""
        started = time.monotonic()
        why = self._wake(sleeper, gone_pids)
        report: ChainReport | None = None
        if why is None:
            report = self.execute.gates(
                sleeper, self.progress, lambda: False, self.hooks.gpu_bytes, only=HTTP_GATES
            )
            failure = report.first_failure
            why = f"re-gate: {failure.name}: {failure.summary}" if failure is not None else None
        seconds = round(time.monotonic() - started, 3)
        if why is not None:
            self.transitions.record(
                Event.WAKE_FAILED, label=sleeper.candidate.label, reason=why, seconds=seconds
            )
        return why, report, seconds

    def _wake(self, parked: Attempt, rejected_pids: Sequence[int]) -> str | None:
        settings = parked.candidate.settings
        if parked.engine.exited.is_set():
            return f"the parked engine is gone: {parked.engine.exit_description()}"
        deadline = time.monotonic() + settings.wake_timeout_s
        while (self._gpu_bytes(rejected_pids) or 0) > 0 and time.monotonic() < deadline:
            time.sleep(0.1)  # the candidate's memory must be back before the sleeper takes its own
        control = self.execute.sleep(parked.candidate)
        why = control.wake(settings.wake_timeout_s)
        if why is None and control.is_sleeping(settings.wake_timeout_s) is not False:
            why = "/is_sleeping does not say it is awake"
        if why is None:
            why = control.reset_prefix_cache(settings.wake_timeout_s)  # a stale cache answered garbage
        return why

    # ---- back to the engine kept asleep (`keep_parked`: `launch rollback` in seconds) ---------------
    def _back_to_parked(self, candidate: Candidate) -> bool:
        """The change asks for the launch that sleeps beside what serves: wake it instead of a start.
        What serves goes to sleep in its place (or stops), and hands over its GPU locks. False when
        nothing sleeps with that launch, or its wake failed (then the caller starts the candidate)."""
        parked, serving = self.parked, self.current
        if parked is None or serving is None or not parked.candidate.same_launch(candidate):
            return False
        self._stop_watch()
        pids = serving.engine.process_tree()
        locks = serving.held.pop_all()
        with self._stop_lock:
            self.parked = None
        if serving.candidate.settings.keep_parked and can_sleep(serving.candidate) and self._sleep(serving):
            with self._stop_lock:
                self.parked, self.current = serving, None
            pids = []
        else:
            self._stop_current(f"back to the parked {parked.candidate.label}")
        parked.held.enter_context(locks)
        with self._stop_lock:
            self.current = parked
        return self._serve_woken(parked, pids)

    def _serve_woken(self, woken: Attempt, gone_pids: Sequence[int]) -> bool:
        why, _, seconds = self._wake_and_regate(woken, gone_pids)
        if why is not None:
            self._stop_current(f"its wake failed: {why}")
            return False
        record = {**woken.candidate.to_record(), "promoted_at": utc_now()}
        self._keep_previous_good(woken.candidate)
        self.store.write_last_good(self.profile, record)
        self.serving_last_good = False
        self.transitions.record(
            Event.WOKEN, phase=Phase.SERVING,
            status={"serving_fingerprint": woken.candidate.fingerprint, "rollback_reason": None,
                    "engine_pid": woken.engine.pid, "detail": woken.candidate.label, **self._fresh_watch()},
            show={"fingerprint": woken.candidate.fingerprint},
            ready=f"serving {woken.candidate.label}, woken",
            label=woken.candidate.label, seconds=seconds, port=woken.candidate.port,
            why="back to the parked launch",
        )  # fmt: skip
        self._switched(woken.candidate)
        self._start_watch()
        return True

    # ---- lent to `launch probe`: its arms run on these GPUs while production sleeps ---------------
    def _control(self, request: ControlRequest) -> int | None:
        """Answer a park or wake request by id; an exit code when the launcher must leave."""
        code: int | None = None
        if request.action is Action.PARK:
            verdict = self._lend(request.requester)
        else:
            verdict, code = self._take_back(f"asked by pid {request.requester}")
        reload_requests.answer(self.store.reloads_dir(self.profile), [request.rid], verdict)
        return code

    def _lend(self, requester: int) -> Verdict:
        serving = self.current
        if self.lent_to is not None and serving is not None:
            return self._lent_verdict(serving)
        why = why_not_lend(serving.candidate if serving is not None else None)
        if why is not None:
            return Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), f"not parked: {why}")
        assert serving is not None
        self._stop_watch()
        if not self._sleep(serving):
            self._start_watch()
            return Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), "not parked: the sleep failed")
        serving.held.close()  # its GPU locks: the arms take them, and hand them back when they end
        self.lent_to = requester
        detail = (f"asleep, its GPUs lent to launch probe pid {requester}; it wakes when the probe ends "
                  "(or is gone)")  # fmt: skip
        self.transitions.record(
            phase=Phase.PARKED, status={"detail": detail, "watch": None}, tell=detail, show={}
        )
        return self._lent_verdict(serving)

    def _lent_verdict(self, serving: Attempt) -> Verdict:
        data = {"pids": sorted(serving.engine.process_tree()), "port": other_port(serving.candidate),
                "serving_port": serving.candidate.port}  # fmt: skip
        return Verdict(Outcome.PARKED, int(ExitCode.OK), f"parked {serving.candidate.label}", data=data)

    def _take_back(self, why: str) -> tuple[Verdict, int | None]:
        """Wake the lent engine and serve it again; a wake that fails restarts it cold."""
        attempt = self.current
        if self.lent_to is None or attempt is None:
            return Verdict(Outcome.WOKEN, int(ExitCode.OK), "not parked: nothing to wake"), None
        refused = self._retake_locks(attempt)
        if refused is not None:  # an arm still holds them: stay parked, ask again later
            return Verdict(Outcome.FAILED, int(ExitCode.PREFLIGHT_REFUSED), f"still parked: {refused}"), None
        self.lent_to = None
        failed, _, seconds = self._wake_and_regate(attempt, ())
        if failed is not None:
            code = self._restart(attempt.candidate, f"the wake failed ({failed})")
            outcome = Outcome.WOKEN if code is None else Outcome.FAILED
            return Verdict(outcome, int(code or ExitCode.OK), f"wake failed: {failed}; restarted cold"), code
        phase = Phase.SERVING_LAST_GOOD if self.serving_last_good else Phase.SERVING
        self.transitions.record(
            Event.WOKEN, phase=phase, status={"detail": attempt.candidate.label, **self._fresh_watch()},
            show={"after": why},
            ready=f"serving again, woken; {why}", label=attempt.candidate.label, seconds=seconds, why=why,
        )  # fmt: skip
        self._switched(attempt.candidate)
        self._start_watch()
        return Verdict(
            Outcome.WOKEN, int(ExitCode.OK), f"woken in {seconds:.2f} s", data={"seconds": seconds}
        ), None

    def _retake_locks(self, attempt: Attempt) -> str | None:
        """The lent engine's GPU locks, taken back; why not (preflight's words), else None."""
        if self.hooks.gpu_locks is None:
            return None
        try:
            attempt.held.enter_context(self.hooks.gpu_locks(attempt.candidate))
        except PreflightRefused as refused:
            return refused.message
        return None

    def _lender_gone(self) -> int | None:
        """A probe that parked this engine and died wakes it by its absence."""
        if self.lent_to is None or _alive(self.lent_to):
            return None
        _, code = self._take_back(f"launch probe pid {self.lent_to} is gone")
        return code

    # ---- what serves, told to the proxy ---------------------------------------------------------------
    def _switched(self, serving: Candidate) -> None:
        """What serves moved (or may have): run `on_switch` with its address (docs/park.md)."""
        argv = switch_argv(serving)
        if argv is None:
            return
        code, output = run_switch(argv)
        self.transitions.record(Event.SWITCHED, port=serving.port, label=serving.label, argv=argv,
                                exit_code=code, output=output)  # fmt: skip
        if code != 0:
            self.progress.message(f"on_switch exited {code}: {output}", event="park.switch_failed")


def _host_available_gib() -> float:
    return float(psutil.virtual_memory().available) / GIB


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
