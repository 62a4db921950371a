"""The probe's journal: what a SIGKILLed probe leaves for the next start to undo.

`STATE/probe/journal.json` (atomic writes, mode 0600: it keeps the launcher's environment) says
which step the probe is in, how production ran (to restart it the same way) and which arm engine
runs (its process group, and the id every arm process carries in `GATE_PROBE_ID`).
`STATE/probe/probe.lock` is flocked for the probe's whole life: the kernel drops it when the probe
dies, so "the lock can be taken" is the proof that the journal's probe is gone, whatever its pid
became since.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from launcher.atomicfile import write_atomic
from launcher.errors import AlreadyRunning, BadInput
from launcher.probe.production import Production
from launcher.state.store import StateStore
from launcher.supervisor.history import utc_now

MARKER_ENV = "GATE_PROBE_ID"  # not VLLM_*: vLLM would warn about an unknown variable of its own


class Step(StrEnum):
    MEASURING = "measuring-production"  # production untouched
    STOPPING = "stopping-production"
    ARM = "arm"  # production stopped; an arm may run
    RESTORING = "restoring"  # the probe is starting production again


@dataclass(frozen=True, slots=True)
class Entry:
    probe_id: str
    probe_pid: int
    profile: str
    step: Step
    production: Production
    arm: str | None = None
    arm_pgid: int | None = None
    arm_started: float | None = None  # epoch seconds: a pgid reused later is not the arm's
    out_dir: str | None = None
    parked: bool = False  # production sleeps, its launcher alive (park = "sleep"): it wakes, never restarts
    updated_at: str = field(default_factory=utc_now)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["production"] = self.production.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        return cls(
            probe_id=str(data["probe_id"]),
            probe_pid=int(data["probe_pid"]),
            profile=str(data["profile"]),
            step=Step(data["step"]),
            production=Production.from_json(dict(data["production"])),
            arm=data.get("arm"),
            arm_pgid=data.get("arm_pgid"),
            arm_started=data.get("arm_started"),
            out_dir=data.get("out_dir"),
            parked=data.get("parked") is True,
            updated_at=str(data.get("updated_at", "")),
        )


class Journal:
    """`with Journal(state_dir) as journal:` holds the probe lock; `write`, `read`, `clear` the entry."""

    def __init__(self, state_dir: Path) -> None:
        store = StateStore(state_dir)
        self.dir = store.probe_dir
        self.path = store.probe_journal_path
        self.lock_path = store.probe_lock_path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the probe lock; False when a live probe holds it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def __enter__(self) -> Self:
        if not self.try_acquire():
            entry = self.read()
            who = f"pid {entry.probe_pid}, profile {entry.profile!r}, step {entry.step}" if entry else "?"
            raise AlreadyRunning(
                f"another `launch probe` is running ({who})",
                hint="one probe at a time per host; wait for it (it restores production when it ends)",
            )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def read(self) -> Entry | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return Entry.from_json(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise BadInput(
                f"probe journal {self.path} is unreadable ({err})",
                hint="inspect it; remove it once production serves and no arm engine is left",
            ) from err

    def write(self, entry: Entry) -> Entry:
        entry = replace(entry, updated_at=utc_now())
        write_atomic(self.path, json.dumps(entry.to_json(), indent=2, sort_keys=True) + "\n", mode=0o600)
        return entry

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
