"""One arm on the box: wait until the box is free, preflight, start, gate, measure, stop.

The arm runs like `launch try` runs a profile (supervisor/attempt.py: its own process group, the
gate chain, the GPU locks for its whole life), with the probe's id in its environment so that a
dead probe's arm can be found by that id alone. The journal gets the arm's process group as soon as
it exists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from basis.clock import Clock
from launcher.bench.target import Endpoint
from launcher.errors import GateError, PreflightRefused
from launcher.host.gpu import GpuProbe
from launcher.probe.arms import Arm
from launcher.probe.journal import MARKER_ENV, Step
from launcher.probe.measure import Interrupted, Measure
from launcher.probe.release import NotReleased, wait_released
from launcher.probe.results import ArmOutcome, ArmRun, Settings
from launcher.profile.candidate import Candidate
from launcher.supervisor.attempt import gate_attempt, launch_attempt
from launcher.supervisor.history import Event, History
from launcher.supervisor.progress import Progress
from launcher.supervisor.seams import Attempt, Hooks

Gates = tuple[dict[str, Any], ...]


@dataclass
class Trial:
    settings: Settings
    hooks: Hooks
    measure: Measure
    progress: Progress
    clock: Clock
    probe_factory: Callable[[], GpuProbe]
    probe_id: str
    stop: threading.Event
    history: History
    journal: Callable[..., None]  # updates the journal entry with the given fields
    gone_pids: set[int]  # the last server's processes: none of them may hold a GPU when an arm starts
    current: Attempt | None = None
    arm_port: int | None = None  # production sleeps on its own port: the arms serve on this one
    serving_port: int | None = None  # where production serves now: arm 0 is measured there
    parked_pids: frozenset[int] = frozenset()  # production's, asleep: its residue counts, no 2nd model

    def __post_init__(self) -> None:
        self._guard = threading.Lock()

    def run(self, arm: Arm, *, serving: bool) -> ArmRun:
        """Measure `arm`; with `serving`, arm 0 is measured where production serves, never restarted."""
        began = self.clock.monotonic()
        candidate = self.candidate(arm)
        if serving:
            self.progress.set_phase(f"arm 0 {arm.name}: measuring production as it serves")
            return self._measure(arm, candidate, began, None, ())
        release = None
        try:
            self.journal(step=Step.ARM, arm=arm.name, arm_pgid=None, arm_started=time.time())
            self.progress.set_phase(f"arm {arm.index} {arm.name}", keys=arm.describe_keys())
            release = wait_released(
                arm.plan,
                gone_pids=self.gone_pids,
                clock=self.clock,
                probe_factory=self.probe_factory,
                deadline=self.clock.monotonic() + self.settings.release_timeout_s,
                on_wait=self.progress.message,
                port=candidate.port,
            ).describe()
            if self.hooks.preflight is not None and self.parked_pids:
                self.hooks.preflight(candidate, parked=self.parked_pids)
            elif self.hooks.preflight is not None:
                self.hooks.preflight(candidate)
            attempt = self._start(arm, candidate)
            self.journal(arm_pgid=attempt.engine.pgid)
            report = gate_attempt(attempt, self.progress, self.stop.is_set, self.hooks.gpu_bytes)
            gates = tuple(report.to_json())
            if self.stop.is_set():
                return self._ran(
                    arm, candidate, ArmOutcome.INTERRUPTED, "stopped while gating", began, release, gates
                )
            if not report.passed:
                failed = report.first_failure
                why = f"rejected by {failed.name}: {failed.summary}" if failed else "rejected"
                return self._ran(arm, candidate, ArmOutcome.REJECTED, why, began, release, gates)
            return self._measure(arm, candidate, began, release, gates)
        except (PreflightRefused, NotReleased) as err:
            return self._ran(arm, candidate, ArmOutcome.REFUSED, err.message, began, release, ())
        except GateError as err:
            return self._ran(arm, candidate, ArmOutcome.FAILED, err.message, began, release, ())
        finally:
            self.stop_current()
            self.journal(arm=None, arm_pgid=None)

    def candidate(self, arm: Arm) -> Candidate:
        base = Candidate.from_plan(arm.plan)
        label = f"probe arm {arm.name} {base.profile}@{base.fingerprint}"
        if self.arm_port is not None and not arm.is_production:
            base = base.at_port(self.arm_port)
        if arm.is_production and self.serving_port is not None:
            base = base.at_port(self.serving_port)  # not engine.port: a parked change may have moved it
        return replace(base, label=label, env={**base.env, MARKER_ENV: self.probe_id})

    def _measure(
        self, arm: Arm, candidate: Candidate, began: float, release: str | None, gates: Gates
    ) -> ArmRun:
        names = candidate.expect.served_model_names
        model = names[0] if names else None
        endpoint = Endpoint(candidate.base_url, model, candidate.api_key(), f"arm {arm.name}")
        try:
            measurement = self.measure(arm.name, endpoint)
        except Interrupted:
            why = "stopped while measuring"
            return self._ran(arm, candidate, ArmOutcome.INTERRUPTED, why, began, release, gates)
        except GateError as err:
            return self._ran(arm, candidate, ArmOutcome.FAILED, err.message, began, release, gates)
        run = self._ran(arm, candidate, ArmOutcome.MEASURED, None, began, release, gates)
        return replace(run, measurement=measurement)

    def _ran(
        self,
        arm: Arm,
        candidate: Candidate,
        outcome: ArmOutcome,
        detail: str | None,
        began: float,
        release: str | None,
        gates: Gates,
    ) -> ArmRun:
        self.history.append(
            Event.PROBE_ARM,
            profile=candidate.profile,
            probe_id=self.probe_id,
            arm=arm.name,
            outcome=str(outcome),
            detail=detail,
            fingerprint=candidate.fingerprint,
        )
        seconds = self.clock.monotonic() - began
        return ArmRun(arm, outcome, detail, None, gates, seconds, release, candidate.fingerprint)

    def _start(self, arm: Arm, candidate: Candidate) -> Attempt:
        log_path = self.settings.out_dir / f"arm-{arm.name}" / "engine.log"
        attempt = launch_attempt(
            candidate, log_path, self.progress, gpu_locks=self.hooks.gpu_locks, loading=self.hooks.loading
        )
        with self._guard:
            self.current = attempt
        if self.stop.is_set():  # the signal came while it was being started
            attempt.engine.stop(grace_s=attempt.candidate.settings.stop_grace_s)
        return attempt

    def stop_current(self) -> None:
        """Stop the arm's whole process group (TERM → grace → KILL) and remember its pids."""
        with self._guard:
            attempt, self.current = self.current, None
        if attempt is None:
            return
        pids = set(attempt.engine.process_tree())
        self.gone_pids = pids or ({attempt.engine.pid} if attempt.engine.pid else set())
        attempt.stop(grace_s=attempt.candidate.settings.stop_grace_s)

    def interrupt(self) -> None:
        """From the signal thread: end the engine now, so a gate blocked in HTTP returns."""
        with self._guard:
            attempt = self.current
        if attempt is not None:
            attempt.engine.stop(grace_s=attempt.candidate.settings.stop_grace_s)
