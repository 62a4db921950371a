"""Status and history finalised on every way out, and what a killed launcher left tidied by the next.

A SIGTERM mid-start, an error mid-rollback or a corrupt last-good record once left `status.json`
at `gating`/`rolling_back` with a dead engine pid and no `stopped` record. On the way out the
launcher now writes the final phase itself; a SIGKILL cannot be caught, so the next start of
the profile writes the record the killed launcher could not, and removes its stray temp files.
"""

from __future__ import annotations

import psutil

from launcher.atomicfile import remove_stray_temps
from launcher.errors import GateError
from launcher.state.store import StateStore
from launcher.supervisor.bookkeeping import Bookkeeping
from launcher.supervisor.events import Event
from launcher.supervisor.history import History
from launcher.supervisor.status import Phase, read_status
from launcher.supervisor.transitions import Transitions

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
        Event.STOPPED, profile=profile, signal="unknown (launcher killed)", during=previous["phase"],
        launcher_pid=previous.get("launcher_pid"), found_by="next start",
    )  # fmt: skip


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "launcher exited"
    if isinstance(error, GateError):
        return error.message
    return f"launcher error {type(error).__name__}: {error}"
