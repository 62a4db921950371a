"""Atomic file writes (temp file, fsync, rename, fsync dir) and append-only lines.

Profiles, `.bak` snapshots and state are written this way so a crash or a full disk never leaves
a half-written file behind: readers see the old content or the new, nothing in between. A temp
file carries its writer's pid (`.NAME.PID.XXXX.tmp`), so the next run can remove the ones a
SIGKILLed writer left (`remove_stray_temps`) without touching a live writer's.

Links are not followed (docs/host-safety.md "Symbolic links"): a state file, or a directory on its
way, that is a symbolic link is refused with ELOOP, for reads (`read_bytes_nofollow`), appends and
atomic writes, so a link planted in the state dir never sends a write (as root, under systemd)
outside it. The state dir itself may be a link: the CLI resolves it once. Profiles are the
exception the operator asks for: `follow_links=True` writes a symlinked profile through its link.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

WriteFn = Callable[[int, bytes], int]  # os.write's shape: the seam a test uses to fill the disk
MAX_READ_BYTES = 64 * 1024 * 1024  # a state file larger than this is not ours: refused, never read whole
STRAY_RE = re.compile(r"\A\..+\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp\Z")


def write_atomic(
    path: Path,
    data: str | bytes,
    *,
    mode: int | None = None,
    write: WriteFn = os.write,
    follow_links: bool = False,
) -> None:
    """Replace `path` with `data` atomically; keeps the old file's permissions unless `mode` is given.

    A link at `path` or on its way is refused (ELOOP) unless `follow_links`: then a symlinked `path`
    is written through (its target is replaced and the link stays a link)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if follow_links and path.is_symlink():
        path = path.resolve()
    if not follow_links:
        refuse_links(path)  # before mkdir: a linked directory on the way is not created through
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None and path.exists():
        mode = path.stat().st_mode & 0o7777
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            _write_all(fd, payload, write)
            os.fsync(fd)
        finally:
            os.close(fd)
        if mode is not None:
            os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def append_line(path: Path, line: str, *, write: WriteFn = os.write) -> None:
    """Append one line (O_APPEND, flock, fsync): history is append-only and never rewritten.

    A record is never torn: a short or failed write (ENOSPC) is cut back off the file before the
    error is raised, and a torn tail left by a crash is closed with a newline first, so the next
    record is never glued to it."""
    if "\n" in line:
        raise ValueError("an appended record must be a single line")
    refuse_links(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)  # O_NONBLOCK: a FIFO planted there never blocks the writer
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        fcntl.flock(fd, fcntl.LOCK_EX)  # launchers of several profiles share one history
        size = os.fstat(fd).st_size
        payload = (line + "\n").encode("utf-8")
        if size > 0 and _last_byte(path, size) != b"\n":
            payload = b"\n" + payload
        try:
            _write_all(fd, payload, write)
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def read_bytes_nofollow(path: Path, limit: int = MAX_READ_BYTES) -> bytes:
    """A state file's bytes: not through a link (ELOOP), not a device or a FIFO (EINVAL, opened without
    blocking), and not more than `limit` bytes (EFBIG): a corrupt or planted file never hangs or
    floods the reader."""
    refuse_links(path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            if sum(len(c) for c in chunks) > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def refuse_links(path: Path) -> None:
    """ELOOP when `path` or a directory on its way is a symbolic link (callers pass resolved roots)."""
    parent = os.path.abspath(path.parent)
    if os.path.realpath(parent) != parent:
        raise OSError(errno.ELOOP, "a directory on its way is a symbolic link; not followed", str(path))
    if path.is_symlink():
        raise OSError(errno.ELOOP, "a symbolic link; not followed", str(path))


def remove_stray_temps(directory: Path, alive: Callable[[int], bool]) -> list[Path]:
    """Remove the temp files of writers that are gone (a SIGKILL between mkstemp and rename)."""
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for entry in entries:
        found = STRAY_RE.match(entry.name)
        if found is None or alive(int(found.group("pid"))) or not entry.is_file():
            continue
        try:
            entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed


def _write_all(fd: int, payload: bytes, write: WriteFn) -> None:
    """os.write may write less than asked (a nearly full disk): loop until all is written."""
    view = memoryview(payload)
    while view:
        written = write(fd, bytes(view))
        if written <= 0:
            raise OSError(28, "No space left on device (short write)")
        view = view[written:]


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as reader:
        reader.seek(size - 1)
        return reader.read(1)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
