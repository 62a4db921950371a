"""One front door per profile. Caddy binds its listeners with SO_REUSEPORT and unlinks a socket
path before it binds there, so a second door of the same profile would start without an error,
share the clients' port and take the admin socket from the first. `launch frontdoor` takes an
flock first and leaves its file descriptor open across the exec: Caddy holds the lock for its whole
life, and a door that dies (SIGKILL included) lets go with its process."""

from __future__ import annotations

import fcntl
import os

from launcher.atomicfile import refuse_links
from launcher.errors import AlreadyRunning, BadInput
from launcher.frontdoor.door import Door

_MAX_INFO = 64


def take_door_lock(door: Door) -> int:
    """The locked descriptor, inheritable (so the exec keeps it); its pid written into it (the same
    after the exec: Caddy's)."""
    fd = _open(door)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, _MAX_INFO, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise AlreadyRunning(
            f"the front door of profile {door.profile!r} runs already (pid {holder or '?'} holds "
            f"{door.lock_path}); nothing was started",
            hint=f"systemctl status vllm-gate-frontdoor@{door.profile}; stop that one first",
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except OSError:
        pass  # it only names the holder
    os.set_inheritable(fd, True)
    return fd


def _open(door: Door) -> int:
    try:
        refuse_links(door.lock_path)
        door.lock_path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(door.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise BadInput(
            f"cannot take the front door's lock {door.lock_path}: {err.strerror or err}; nothing was started",
            hint="check that the state dir is writable (--state-dir, $VLLM_GATE_STATE)",
        ) from err
