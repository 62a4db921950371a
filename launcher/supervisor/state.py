"""The serving state: one explicit record of what this launcher runs, owned by one object, behind one
lock (`ServingState`).

What serves (and whether it is last-good), what is on trial (a candidate starting or being gated),
what is parked asleep beside them, which `launch probe` the sleeper's GPUs are lent to, the serving
watch of what serves, and where the proxy in front was last pointed. Before, these were attributes of
one class assembled from four mixins, each half changing them; now every change is a method here,
atomic under the lock, and the collaborators (bring-up, park, lending, recovery, reload) hold this
object, never each other's fields. It starts and stops nothing: the stage (`stage.py`) does that
with what it takes out of the record.

The signal helper thread stops what runs while the serve loop works (attempt.StopOnSignal): every
read-and-change is one method call under the lock, so the two never see half a change.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from launcher.supervisor.seams import Attempt, WatchHandle


@dataclass(frozen=True, slots=True)
class ServingView:
    """The record at one moment (what `launch status` and tests read; nothing to change)."""

    serving: Attempt | None
    trial: Attempt | None
    parked: Attempt | None
    on_last_good: bool
    lent_to: int | None
    pointed_at: int | None

    @property
    def running(self) -> tuple[Attempt, ...]:
        """What runs awake: the trial and what serves (the sleeper is apart)."""
        return tuple(a for a in (self.trial, self.serving) if a is not None)


class ServingState:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._serving: Attempt | None = None
        self._trial: Attempt | None = None
        self._parked: Attempt | None = None
        self._on_last_good = False
        self._lent_to: int | None = None  # the pid of the `launch probe` the sleeper's GPUs are lent to
        self._pointed_at: int | None = None  # the port the proxy in front was last pointed at (None: held)
        self._watch: WatchHandle | None = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the record still across a read and an action (a watch started for what serves)."""
        with self._lock:
            yield

    # ---- reading ---------------------------------------------------------------------------------
    def view(self) -> ServingView:
        with self._lock:
            return ServingView(
                self._serving, self._trial, self._parked, self._on_last_good, self._lent_to, self._pointed_at
            )

    @property
    def serving(self) -> Attempt | None:
        return self._serving

    @property
    def trial(self) -> Attempt | None:
        return self._trial

    @property
    def parked(self) -> Attempt | None:
        return self._parked

    @property
    def on_last_good(self) -> bool:
        return self._on_last_good

    @property
    def lent_to(self) -> int | None:
        return self._lent_to

    @property
    def watch(self) -> WatchHandle | None:
        return self._watch

    def newest(self) -> Attempt | None:
        """The engine that started last and still runs awake: the trial, else what serves."""
        with self._lock:
            return self._trial or self._serving

    # ---- a trial ---------------------------------------------------------------------------------
    def begin_trial(self, attempt: Attempt) -> None:
        with self._lock:
            if self._trial is not None:
                raise RuntimeError(f"a trial runs already: {self._trial.candidate.label}")
            self._trial = attempt

    def promote_trial(self, *, last_good: bool) -> Attempt:
        """The trial passed: it is what serves now (`last_good`: a rollback's, not the profile's)."""
        with self._lock:
            attempt, self._trial = self._trial, None
            if attempt is None:
                raise RuntimeError("no trial to promote")
            self._serving, self._on_last_good = attempt, last_good
            return attempt

    # ---- what serves -----------------------------------------------------------------------------
    def serve(self, attempt: Attempt, *, last_good: bool) -> None:
        """`attempt` serves (a woken sleeper): nothing else may be serving."""
        with self._lock:
            if self._serving is not None and self._serving is not attempt:
                raise RuntimeError(f"{self._serving.candidate.label} serves already")
            self._serving, self._on_last_good = attempt, last_good

    def take_serving(self) -> Attempt | None:
        """Take what serves out of the record, leaving the trial (a candidate beside it passed)."""
        with self._lock:
            serving, self._serving = self._serving, None
            return serving

    def take_trial(self) -> Attempt | None:
        """Take the trial out of the record, leaving what serves (a candidate beside it was rejected)."""
        with self._lock:
            trial, self._trial = self._trial, None
            return trial

    def mark_last_good(self) -> None:
        """What serves is last-good now: the profile's file holds a change that was rejected."""
        with self._lock:
            self._on_last_good = True

    def mark_profile_launch(self) -> None:
        """What serves is the profile's launch again (a rollback of the file to it: `launch rollback`)."""
        with self._lock:
            self._on_last_good = False

    def take_running(self) -> tuple[Attempt, ...]:
        """Take the trial and what serves out of the record (to be stopped); the watch goes with them."""
        with self._lock:
            taken = tuple(a for a in (self._trial, self._serving) if a is not None)
            self._trial = self._serving = None
            return taken

    def take_watch(self) -> WatchHandle | None:
        with self._lock:
            watch, self._watch = self._watch, None
            return watch

    def set_watch(self, watch: WatchHandle) -> None:
        with self._lock:
            if self._watch is not None:
                raise RuntimeError("a watch runs already")
            self._watch = watch

    def pointed(self, port: int | None) -> None:
        """The proxy in front was told the engine on `port` serves (None: hold requests at the door)."""
        with self._lock:
            self._pointed_at = port

    # ---- parked ----------------------------------------------------------------------------------
    def park_serving(self) -> Attempt:
        """What serves sleeps now: it is parked, and nothing serves."""
        with self._lock:
            attempt, self._serving = self._serving, None
            if attempt is None:
                raise RuntimeError("nothing serves to park")
            if self._parked is not None:
                raise RuntimeError(f"{self._parked.candidate.label} is parked already")
            self._parked = attempt
            return attempt

    def park(self, attempt: Attempt) -> None:
        """`attempt`, out of the record and asleep now, is parked (what a trial beside it replaced)."""
        with self._lock:
            if self._parked is not None:
                raise RuntimeError(f"{self._parked.candidate.label} is parked already")
            self._parked = attempt

    def take_parked(self) -> Attempt | None:
        with self._lock:
            parked, self._parked = self._parked, None
            return parked

    # ---- lent to `launch probe` ------------------------------------------------------------------
    def lend(self, requester: int) -> None:
        with self._lock:
            self._lent_to = requester

    def take_back(self) -> int | None:
        with self._lock:
            lent, self._lent_to = self._lent_to, None
            return lent
