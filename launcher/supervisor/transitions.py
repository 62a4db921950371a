"""The supervisor's one transition point: a phase change or an event reaches the history, the
status board, the progress output and systemd together, always in the same order.

Before, each transition paired `board.update`, `history.append`, `progress.set_phase` and the
notifier by hand, and a half forgotten in one place went unnoticed. The order: the history record
first, then `status.json` (what `launch status` and a reload's requester poll: once it shows the new
phase the record is there), then the Prometheus textfile, then the progress line, then systemd
(READY=1 only once the status says serving).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from launcher.state.metrics import LauncherMetrics
from launcher.supervisor.events import Event
from launcher.supervisor.history import History
from launcher.supervisor.progress import Progress
from launcher.supervisor.seams import Notifier
from launcher.supervisor.status import Phase, StatusBoard


class Transitions:
    def __init__(
        self, profile: str, board: StatusBoard, history: History, progress: Progress, notifier: Notifier,
        metrics: LauncherMetrics | None = None,
    ) -> None:  # fmt: skip
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
        if show is not None:
            self.progress.set_phase(str(phase or self.board.current.phase), **show)
        if tell is not None:
            self.notifier.status(tell)
        if ready is not None:
            self.notifier.ready(ready)
