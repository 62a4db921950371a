"""What every collaborator of the serve loop is constructed with (`Context`): the profile, its state
dir, the one transition point, the progress output, the seams (`Execute`, `Hooks`), the clock, the
serving state and the signal inbox. Built once by `service.Supervisor`; each collaborator (the stage,
bring-up, park, lending, recovery, reload) keeps it and reaches nothing of the others but what it is
handed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from basis.clock import Clock
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.attempt import SignalInbox
from launcher.supervisor.progress import Progress
from launcher.supervisor.seams import Execute, Hooks
from launcher.supervisor.state import ServingState
from launcher.supervisor.status import Transitions


@dataclass(frozen=True, slots=True)
class Context:
    profile: str
    options: GlobalOptions
    store: StateStore
    transitions: Transitions
    progress: Progress
    hooks: Hooks
    execute: Execute
    clock: Clock
    state: ServingState
    inbox: SignalInbox
    wake: threading.Event  # sets the serve loop going: a death, a signal, the watch's news
    deployment: str  # marks vLLM's processes as this deployment's (launcher/host/orphans.py)
    allow_unknown: bool = False  # render flags the schema does not know (a fork's), as warnings

    def stop_requested(self) -> bool:
        return self.inbox.stop_requested.is_set()
