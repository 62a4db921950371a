"""What runs now, in one atomically written file: `launch status` and `launch rollback` read it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic
from launcher.state.records import STATUS, STATUS_OPTIONAL, read_record
from launcher.supervisor.history import utc_now


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


class StatusBoard:
    def __init__(
        self, path: Path, profile: str, write: Callable[[Path, str], None] = write_atomic
    ) -> None:  # `write`: the serve loop passes one that queues a failed write for a retry
        self.path = path
        self.current = Status(phase=Phase.STARTING, profile=profile)
        self._write = write

    def update(self, **changes: Any) -> Status:
        if "phase" in changes and changes["phase"] != self.current.phase:
            changes.setdefault("phase_since", utc_now())
        self.current = replace(self.current, **changes)
        self._write(self.path, json.dumps(asdict(self.current), indent=2, default=str) + "\n")
        return self.current


def read_status(path: Path) -> dict[str, Any] | None:
    """None when there is no status; BadInput naming the file when it is corrupt."""
    return read_record(path, STATUS, STATUS_OPTIONAL)
