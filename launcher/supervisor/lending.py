"""Lending: the serving engine put to sleep and its GPUs lent to `launch probe`'s arms, then woken
when the probe asks (`take_back`) or is gone (`lender_gone`).

The probe asks by a control request (`reload_requests.Action`: park, wake) and SIGHUP; the answer
goes back by id. While lent, the sleeper's GPU locks are the arms' (they take and give them back);
taking the engine back takes its locks again first — an arm that still holds them keeps it parked —
then wakes and re-gates it, and a wake that fails restarts it cold.
"""

from __future__ import annotations

import psutil

from launcher.errors import ExitCode, PreflightRefused
from launcher.supervisor import reload_requests
from launcher.supervisor.context import Context
from launcher.supervisor.history import Event
from launcher.supervisor.park import Parker
from launcher.supervisor.recovery import Recovery
from launcher.supervisor.reload_requests import Action, ControlRequest, Outcome, Verdict
from launcher.supervisor.seams import Attempt
from launcher.supervisor.sleep import other_port, why_not_lend
from launcher.supervisor.stage import Stage
from launcher.supervisor.status import Phase


class Lending:
    def __init__(self, ctx: Context, stage: Stage, parker: Parker, recovery: Recovery) -> None:
        self.ctx = ctx
        self.stage = stage
        self.parker = parker
        self.recovery = recovery

    def answer(self, request: ControlRequest) -> int | None:
        """Answer a park or wake request by id; an exit code when the launcher must leave."""
        code: int | None = None
        if request.action is Action.PARK:
            verdict = self.lend(request.requester)
        else:
            verdict, code = self.take_back(f"asked by pid {request.requester}")
        reload_requests.answer(self.ctx.store.reloads_dir(self.ctx.profile), [request.rid], verdict)
        return code

    def lend(self, requester: int) -> Verdict:
        state = self.ctx.state
        serving = state.serving
        if state.lent_to is not None and serving is not None:
            return self._lent_verdict(serving)
        why = why_not_lend(serving.candidate if serving is not None else None)
        if why is not None:
            return Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), f"not parked: {why}")
        assert serving is not None
        self.stage.stop_watch()
        self.stage.drain(serving, f"lend to launch probe pid {requester}")
        if not self.parker.sleep(serving):
            self.stage.go_live(serving.candidate)  # still awake: clients come back to it
            return Verdict(Outcome.REFUSED, int(ExitCode.PREFLIGHT_REFUSED), "not parked: the sleep failed")
        serving.held.close()  # its GPU locks: the arms take them, and hand them back when they end
        state.lend(requester)
        detail = (
            f"asleep, its GPUs lent to launch probe pid {requester}; "
            "it wakes when the probe ends (or is gone)"
        )
        self.ctx.transitions.record(
            phase=Phase.PARKED, status={"detail": detail, "watch": None}, tell=detail, show={}
        )
        return self._lent_verdict(serving)

    def _lent_verdict(self, serving: Attempt) -> Verdict:
        data = {
            "pids": sorted(serving.engine.process_tree()),
            "port": other_port(serving.candidate),
            "serving_port": serving.candidate.port,
        }
        return Verdict(Outcome.PARKED, int(ExitCode.OK), f"parked {serving.candidate.label}", data=data)

    def take_back(self, why: str) -> tuple[Verdict, int | None]:
        """Wake the lent engine and serve it again; a wake that fails restarts it cold."""
        state = self.ctx.state
        attempt = state.serving
        if state.lent_to is None or attempt is None:
            return Verdict(Outcome.WOKEN, int(ExitCode.OK), "not parked: nothing to wake"), None
        refused = self._retake_locks(attempt)
        if refused is not None:  # an arm still holds them: stay parked, ask again later
            return Verdict(Outcome.FAILED, int(ExitCode.PREFLIGHT_REFUSED), f"still parked: {refused}"), None
        state.take_back()
        failed, _, watch = self.parker.wake_and_regate(attempt, ())
        if failed is not None:
            code = self.recovery.restart(attempt.candidate, f"the wake failed ({failed})")
            outcome = Outcome.WOKEN if code is None else Outcome.FAILED
            return Verdict(outcome, int(code or ExitCode.OK), f"wake failed: {failed}; restarted cold"), code
        phase = Phase.SERVING_LAST_GOOD if state.on_last_good else Phase.SERVING
        self.stage.record_serving(
            Event.WOKEN,
            phase=phase,
            status={"detail": attempt.candidate.label},
            show={"after": why},
            ready=f"serving again, woken; {why}",
            label=attempt.candidate.label,
            **watch.as_record(),
            why=why,
        )
        self.stage.go_live(attempt.candidate)
        seconds = watch.seconds
        verdict = Verdict(
            Outcome.WOKEN, int(ExitCode.OK), f"woken in {seconds:.2f} s", data={"seconds": seconds}
        )
        return verdict, None

    def _retake_locks(self, attempt: Attempt) -> str | None:
        """The lent engine's GPU locks, taken back; why not (preflight's words), else None."""
        gpu_locks = self.ctx.hooks.gpu_locks
        if gpu_locks is None:
            return None
        try:
            attempt.held.enter_context(gpu_locks(attempt.candidate))
        except PreflightRefused as refused:
            return refused.message
        return None

    def lender_gone(self) -> int | None:
        """A probe that parked this engine and died wakes it by its absence."""
        lent_to = self.ctx.state.lent_to
        if lent_to is None or _alive(lent_to):
            return None
        _, code = self.take_back(f"launch probe pid {lent_to} is gone")
        return code


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
