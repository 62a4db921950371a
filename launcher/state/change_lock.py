"""One change to a profile at a time: `launch set` and `launch rollback` hold it from reading the
profile to the verdict of the reload they asked for.

Without it, a `set --apply` and a `rollback` sent at the same moment both wrote the profile, both
asked for a reload, and the launcher's one reload answered both "promoted": both exited 0 while only
the last write served. With it, the profile's read-edit-write and its reload request are one critical
section: the second change is refused at once (exit 4, naming the first, its command and pid), before
it reads or writes anything, so each command reports what really serves.

The lock is an flock on `STATE/profiles/NAME/change.lock` (opened without following links); its
holder's pid and command are written into it, for the refusal to name. A holder that is killed
lets go with its file descriptor.
"""

from __future__ import annotations

import fcntl
import json
import os
from types import TracebackType

from launcher.atomicfile import refuse_links
from launcher.errors import BadInput, ChangeInProgress
from launcher.state.store import StateStore

_MAX_INFO = 4096


class ChangeLock:
    """`with ChangeLock(store, "prod", "launch set prod max_num_seqs=16 --apply"):`"""

    def __init__(self, store: StateStore, profile: str, command: str) -> None:
        self.path = store.change_lock_path(profile)
        self.profile = profile
        self.command = command
        self._fd: int | None = None

    def __enter__(self) -> ChangeLock:
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise self._refusal(holder) from None
        self._fd = fd
        info = json.dumps({"pid": os.getpid(), "command": self.command[: _MAX_INFO // 2]}).encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, info + b"\n", 0)
        except OSError:
            pass  # it only names the holder; a full disk must not stop the change
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        try:
            refuse_links(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise BadInput(
                f"cannot take the change lock {self.path}: {err.strerror or err}; nothing was changed",
                hint="check that the state dir is writable (--state-dir, $VLLM_GATE_STATE)",
            ) from err

    def _refusal(self, holder: dict[str, object]) -> ChangeInProgress:
        pid = holder.get("pid")
        command = holder.get("command")
        who = f"`{command}` (pid {pid})" if command and pid else f"pid {pid}" if pid else "another command"
        return ChangeInProgress(
            f"another change to profile {self.profile!r} is in progress: {who}; this one was refused "
            "before reading or writing anything",
            hint="it reports its own verdict; run this again once it has ended "
            "(`launch status` shows what serves)",
        )


def _holder(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, _MAX_INFO, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
