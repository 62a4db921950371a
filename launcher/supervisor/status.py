"""The serve loop's state: what runs now (`status.json`, written atomically: `launch status`,
`launch rollback` and a reload's requester read it), the one transition point that changes it, and
the final phase on every way out.

`Transitions.record`: a phase change or an event reaches the history, the status board, the
Prometheus textfile, the progress output and systemd together, always in this order — the history
record first, then `status.json` (once it shows the new phase the record is there), then the
textfile, then the progress line, then systemd (READY=1 only once the status says serving). Before,
each transition paired them by hand, and a half forgotten in one place went unnoticed.

The way out (`finalise`, `tidy_profile_dir`): a SIGTERM mid-start, an error mid-rollback or a
corrupt last-good record once left `status.json` at `gating`/`rolling_back` with a dead engine pid
and no `stopped` record. On the way out the launcher writes the final phase itself; a SIGKILL cannot
be caught, so the next start of the profile writes the record the killed launcher could not, and
removes its stray temp files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.atomicfile import remove_stray_temps, write_atomic
from launcher.errors import GateError
from launcher.state.metrics import LauncherMetrics
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.state.store import StateStore
from launcher.supervisor.history import Event, History, utc_now

if TYPE_CHECKING:  # the daemon's parts: `launch status` and `check` only read the board
    from launcher.supervisor.bookkeeping import Bookkeeping
    from launcher.supervisor.seams import Notifier, PhaseLine


class Phase(StrEnum):
    STARTING = "starting"
    GATING = "gating"
    SERVING = "serving"
    ROLLING_BACK = "rolling_back"
    SERVING_LAST_GOOD = "serving_last_good"
    FAILED = "failed"
    STOPPED = "stopped"
    PARKED = "parked"  # asleep, its GPUs lent to `launch probe`'s arms (supervisor/park.py)


@dataclass(frozen=True, slots=True)
class Status:
    phase: str
    profile: str
    serving_profile: str | None = None
    serving_fingerprint: str | None = None
    engine_pid: int | None = None
    engine_started_at: str | None = None
    launcher_pid: int = field(default_factory=os.getpid)
    phase_since: str = field(default_factory=utc_now)
    gates: list[dict[str, Any]] = field(default_factory=list)
    rollback_reason: str | None = None
    reload_seq: int = 0
    detail: str | None = None
    watch: dict[str, Any] | None = None  # the serving watch's verdict while something serves
    frontdoor_url: str | None = None  # where clients reach what serves, when the profile has a front door
    trial: dict[str, Any] | None = None  # a candidate tried beside what serves: label, port, engine_pid
    reload_refused: int = 0  # reloads refused since this launcher started (what served kept serving)
    last_reload_refusal: dict[str, Any] | None = None  # the last one: when (`at`) and why (`reason`)


class StatusBoard:
    def __init__(
        self,
        path: Path,
        profile: str,
        write: Callable[[Path, str], None] = write_atomic,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:  # `write`: the serve loop passes one that queues a failed write for a retry
        self.path = path
        self.clock = clock
        self.current = Status(phase=Phase.STARTING, profile=profile, phase_since=utc_now(clock))
        self._write = write

    def update(self, **changes: Any) -> Status:
        if "phase" in changes and changes["phase"] != self.current.phase:
            changes.setdefault("phase_since", utc_now(self.clock))
        self.current = replace(self.current, **changes)
        self._write(self.path, json.dumps(asdict(self.current), indent=2, default=str) + "\n")
        return self.current


def read_status(path: Path) -> dict[str, Any] | None:
    """None when there is no status; BadInput naming the file when it is corrupt."""
    return read_record(path, STATUS, STATUS_OPTIONAL)


class Transitions:
    def __init__(
        self,
        profile: str,
        board: StatusBoard,
        history: History,
        progress: PhaseLine,
        notifier: Notifier,
        metrics: LauncherMetrics | None = None,
    ) -> None:
        self.profile = profile
        self.board = board
        self.history = history
        self.progress = progress
        self.notifier = notifier
        self.metrics = metrics  # the Prometheus textfile (launcher/state/metrics.py), rewritten each time

    def record(
        self,
        event: Event | None = None,
        /,
        *,
        phase: Phase | None = None,
        status: Mapping[str, Any] | None = None,
        show: Mapping[str, Any] | None = None,
        tell: str | None = None,
        ready: str | None = None,
        **fields: Any,
    ) -> None:
        """`event` with `fields` goes to the history (the profile added); `phase` and `status` to
        the board; `show` (fields of the progress line) announces `phase` to the operator; `tell`
        is systemd's STATUS=, `ready` its READY=1 with that status."""
        self._write(event, phase, status, fields)
        if show is not None:
            self.progress.set_phase(str(phase or self.board.current.phase), **show)
        if tell is not None:
            self.notifier.status(tell)
        if ready is not None:
            self.notifier.ready(ready)

    def refresh_metrics(self) -> None:
        """Rewrite the textfile now and then while nothing changes (its timestamps stay fresh)."""
        if self.metrics is not None:
            self.metrics.maybe_refresh()

    def _write(
        self,
        event: Event | None,
        phase: Phase | None,
        status: Mapping[str, Any] | None,
        fields: dict[str, Any],
    ) -> None:
        """The record first (history, then its metric), then the board and the textfile's gauges."""
        if event is not None:
            self.history.append(event, profile=self.profile, **fields)
            if self.metrics is not None:
                self.metrics.event(str(event), fields)
        changes = dict(status or {})
        if phase is not None:
            changes["phase"] = phase
        if changes:
            self.board.update(**changes)
        if self.metrics is not None and (event is not None or changes):
            self.metrics.update(asdict(self.board.current))


FINAL = (Phase.STOPPED, Phase.FAILED)


def finalise(
    transitions: Transitions, books: Bookkeeping, *, stopping: bool, error: BaseException | None
) -> None:
    """Leave a final phase and a closing history record, whatever way the launcher leaves."""
    phase = transitions.board.current.phase
    if phase not in FINAL:
        if stopping or isinstance(error, KeyboardInterrupt):
            detail = f"stopped by a signal during {phase}"
            transitions.record(
                Event.STOPPED,
                phase=Phase.STOPPED,
                status={"engine_pid": None, "detail": detail},
                signal="SIGTERM/SIGINT",
                during=str(phase),
            )
        else:
            why = _describe(error)
            transitions.record(
                Event.FAILED,
                phase=Phase.FAILED,
                status={"engine_pid": None, "detail": f"{why} during {phase}"},
                reason=why,
                during=str(phase),
            )
    books.retry()


def tidy_profile_dir(store: StateStore, profile: str, history: History) -> None:
    """Run once the profile lock is held: close the record of a launcher that was killed, and
    remove the temp files of writers that are gone (in the profile's dir and the state root)."""
    for directory in (store.profile_dir(profile), store.root):
        remove_stray_temps(directory, psutil.pid_exists)
    try:
        previous = read_status(store.status_path(profile))
    except GateError:
        previous = None  # a corrupt status is replaced by this start's first write
    if previous is None or previous["phase"] in FINAL:
        return
    history.append(
        Event.STOPPED,
        profile=profile,
        signal="unknown (launcher killed)",
        during=previous["phase"],
        launcher_pid=previous.get("launcher_pid"),
        found_by="next start",
    )


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "launcher exited"
    if isinstance(error, GateError):
        return error.message
    return f"launcher error {type(error).__name__}: {error}"
