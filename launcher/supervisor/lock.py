"""One launcher per profile: an flock held for the launcher's life, with its pid beside it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from types import TracebackType

from basis.clock import Clock
from launcher.atomicfile import write_atomic
from launcher.errors import AlreadyRunning, BadInput
from launcher.state.store import StateStore
from launcher.supervisor.history import utc_now

RETRY_S = 0.1


class ProfileLock:
    """`with ProfileLock(store, "prod"):` — refuses, naming the pid, when another launcher holds it.

    With `wait_s` (and the `clock` to wait on), a holder that is on its way out is given that long
    to let go first: the probe takes production's lock just after stopping its launcher."""

    def __init__(
        self, store: StateStore, profile: str, *, wait_s: float = 0.0, clock: Clock | None = None
    ) -> None:
        self.profile = profile
        self.lock_path = store.launcher_lock_path(profile)
        self.info_path = store.launcher_info_path(profile)
        self.wait_s = wait_s
        self.clock = clock
        self._fd: int | None = None

    def __enter__(self) -> ProfileLock:
        clock = self.clock
        deadline = clock.monotonic() + self.wait_s if clock is not None else 0.0
        while True:
            try:
                return self._take()
            except AlreadyRunning:
                if clock is None or clock.monotonic() >= deadline:
                    raise
                clock.sleep(RETRY_S)

    def _take(self) -> ProfileLock:
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise BadInput(
                f"cannot take the profile lock {self.lock_path}: {err.strerror or err}",
                hint="check that the state dir is writable (--state-dir, $VLLM_GATE_STATE)",
            ) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.holder_pid()
            who = f"pid {holder}" if holder else "another process"
            raise AlreadyRunning(
                f"a launcher for profile {self.profile!r} is already running ({who})",
                hint="stop it first, or use `launch status` to see what it serves",
            ) from None
        self._fd = fd
        with contextlib.suppress(OSError):  # only names the holder; a full disk must not stop a start
            write_atomic(self.info_path, json.dumps({"pid": os.getpid(), "started_at": utc_now()}) + "\n")
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        if self._fd is not None:
            self.info_path.unlink(missing_ok=True)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder_pid(self) -> int | None:
        try:
            return int(json.loads(self.info_path.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
