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

Confirmed or stale: a record that cannot be rewritten (a full or read-only state dir) would say
`serving` for as long as the disk stays full, while the engine behind it may have wedged long ago.
So every write stamps `confirmed_at`, and while the serve loop ticks with something serving the
record promises the next confirmation within `confirm_every_s` (the serving watch's canary pace);
`stale_cause` is how a reader judges a record that broke that promise. While the loop is busy on
purpose (a reload, a recovery, a stop: it keeps systemd's watchdog alive the same way) the record
promises nothing (`confirm_every_s: null`) and is believed while its state dir can take a write.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from basis.clock import SYSTEM_CLOCK, Clock, epoch_of
from launcher.atomicfile import remove_stray_temps, write_atomic
from launcher.errors import GateError
from launcher.state.metrics import LauncherMetrics
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.state.serving import SERVING_PHASES
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
    confirmed_at: str | None = None  # when the launcher last wrote this record (each write confirms it)
    confirm_every_s: float | None = None  # the next confirmation is promised within this; None: none is


MISSED_CONFIRMATIONS = 3  # a record this many promises overdue (plus the slack) is stale
CONFIRM_SLACK_S = 10.0  # a busy tick, a slow fsync: late, but not yet a launcher that cannot write


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
        self._lock = threading.Lock()  # the serve loop and the stop-on-signal thread both write
        self._written_at: float | None = None  # monotonic: when the last write was tried

    def update(self, **changes: Any) -> Status:
        with self._lock:
            if "phase" in changes and changes["phase"] != self.current.phase:
                changes.setdefault("phase_since", utc_now(self.clock))
            self.current = replace(self.current, **changes, confirmed_at=utc_now(self.clock))
            self._written_at = self.clock.monotonic()
            self._write(self.path, json.dumps(asdict(self.current), indent=2, default=str) + "\n")
            return self.current

    def confirm(self, every_s: float | None) -> None:
        """The serve loop, each tick: rewrite the record when its promise changes or falls due
        (`every_s`: the next confirmation within that; None: the loop is busy and promises none).
        A write that fails is still a try: the next comes one pace later, not every tick."""
        written_at = self._written_at
        due = every_s is not None and (written_at is None or self.clock.monotonic() - written_at >= every_s)
        if due or every_s != self.current.confirm_every_s:
            self.update(confirm_every_s=every_s)


class UnwrittenRecord:
    """Says in the journal, once per cause, that status.json cannot be written (so `launch status`
    will soon call the state unknown), and once when it is written again: no traceback, no line a
    tick. `say(text, event)`: the launcher's progress route."""

    def __init__(self, path: Path, say: Callable[[str, str], None]) -> None:
        self.path = path
        self._say = say
        self.cause: str | None = None

    def check(self, error: OSError | None) -> None:
        """`error`: what keeps the newest record off the disk now, or None when it is written."""
        cause = None if error is None else write_error(error)
        if cause == self.cause:
            return
        if cause is not None:
            text = f"cannot write {self.path}: {cause}; launch status will show the state as unknown"
            self._say(text, "state.status_unwritable")
        else:
            self._say(f"{self.path} is written again: launch status believes it", "state.status_written")
        self.cause = cause


def write_error(error: OSError) -> str:
    """`[Errno 28] No space left on device`: the error without the temp file's name."""
    if error.errno is None:
        return str(error)
    return f"[Errno {error.errno}] {error.strerror or os.strerror(error.errno)}"


def read_status(path: Path) -> dict[str, Any] | None:
    """None when there is no status; BadInput naming the file when it is corrupt."""
    return read_record(path, STATUS, STATUS_OPTIONAL)


def stale_cause(
    record: Mapping[str, Any], now_epoch: float, cannot_write: Callable[[], str | None]
) -> str | None:
    """Why a record that says its launcher serves is not to be believed, or None. Only for a
    launcher that is alive (a dead one's record is judged by its pid alone). `cannot_write`: what
    the reader itself sees of the state dir (full, read-only, not writable), asked only when needed.

    A record that promised a confirmation and is MISSED_CONFIRMATIONS promises (plus the slack)
    overdue is stale, for the cause the reader sees, else for its age. A record that promises none
    (the launcher is busy on purpose) is stale only when the state dir cannot take a write now:
    the loop's next promise could not reach the disk. A record of an older launcher, without
    `confirmed_at`, cannot be judged."""
    if record.get("phase") not in SERVING_PHASES:
        return None
    confirmed = epoch_of(record.get("confirmed_at"))
    if confirmed is None:
        return None
    every_s = record.get("confirm_every_s")
    if every_s is None:
        return cannot_write()
    age_s = now_epoch - confirmed
    if age_s <= MISSED_CONFIRMATIONS * float(every_s) + CONFIRM_SLACK_S:
        return None
    return cannot_write() or f"its record was last confirmed {age_s:.0f} s ago"


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
            record = self.history.append(event, profile=self.profile, **fields)
            if self.metrics is not None:
                self.metrics.event(str(event), record)  # as written: its moment is the metrics' too
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
