"""The seam between the supervisor and the engine process (as tox's `Execute`): what makes an
engine, what the supervisor, the attempt and the gates see of one, and what judges it.

`engine.EngineProcess` is the real engine (a process group, its log keeper, a death watch) and
`attempt.gate_attempt` the real judge (the gate chain over HTTP and the live log). A unit test
passes a scripted engine and scripted chain reports instead (tests/engine_double.py), so the
supervisor's decisions — promote, roll back, reload, refuse, notice a death — run in milliseconds,
with no process and no sleep; the real-process tests prove the wiring.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from launcher.supervisor.engine import LineSink, StopReport
from launcher.supervisor.group_watch import Death

if TYPE_CHECKING:
    from gates.chain import ChainReport
    from launcher.supervisor.adapters import GpuBytesFn
    from launcher.supervisor.attempt import Attempt
    from launcher.supervisor.progress import Progress


class EngineHandle(Protocol):
    """One engine: constructing it starts nothing; `start()` spawns it, `stop()` ends all of it."""

    exited: threading.Event  # set once the engine is dead (any vital process of it)
    death: Death | None  # the first of its processes that ended, and how

    @property
    def pid(self) -> int | None: ...

    @property
    def pgid(self) -> int | None: ...

    def on_exit(self, callback: Callable[[], None]) -> None: ...

    def on_death(self, callback: Callable[[], None]) -> None: ...

    def start(self) -> None: ...

    def exit_description(self) -> str | None: ...

    def process_tree(self) -> list[int]: ...

    def watch_every_process(self) -> None:
        """From now on every vital process of the engine is watched (re-read at once, not at the next
        periodic re-read): called before the engine serves."""

    def group_members(self) -> list[int]: ...

    def stop(self, grace_s: float) -> StopReport: ...


class EngineFactory(Protocol):
    """Makes an engine for `argv`/`env` whose output goes to `sink` (and, through the log keeper,
    to `log_path`)."""

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], sink: LineSink, log_path: Path | None = None
    ) -> EngineHandle: ...


class GateRunner(Protocol):
    """Judges a started attempt: the chain's report (it stops early when `should_stop` says so).
    `only`: run just these gates of the candidate's chain (a woken engine: the ones that speak HTTP)."""

    def __call__(
        self,
        attempt: Attempt,
        progress: Progress,
        should_stop: Callable[[], bool],
        gpu_bytes: GpuBytesFn | None = None,
        only: frozenset[str] | None = None,
    ) -> ChainReport: ...
