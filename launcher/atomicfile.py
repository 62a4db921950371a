"""Atomic file writes (temp file, fsync, rename, fsync dir) and append-only lines.

Profiles, `.bak` snapshots and state are written this way so a crash or a full disk never leaves
a half-written file behind: readers see the old content or the new, nothing in between. A temp
file carries its writer's pid (`.NAME.PID.XXXX.tmp`), so the next run can remove the ones a
SIGKILLed writer left (`remove_stray_temps`) without touching a live writer's.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

WriteFn = Callable[[int, bytes], int]  # os.write's shape: the seam a test uses to fill the disk
STRAY_RE = re.compile(r"\A\..+\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp\Z")


def write_atomic(
    path: Path, data: str | bytes, *, mode: int | None = None, write: WriteFn = os.write
) -> None:
    """Replace `path` with `data` atomically; keeps the old file's permissions unless `mode` is given.

    A symlinked `path` is written through: its target is replaced and the link stays a link."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if path.is_symlink():
        path = path.resolve()
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
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
