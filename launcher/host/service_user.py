"""What the unit's service user still needs: to exist, and to reach the files the unit names.

A `User=` that does not exist fails the start with status 217/USER, and a `launch` in a venv under
root's home fails it with 203/EXEC: both show only in the journal, after `systemctl start`.
`install-unit` says so before, from the mode bits (ACLs are not read: a note may be too cautious,
never silent about a mode that blocks).
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Needed:
    """A path the service user must reach, and how: `r` read, `w` write, `x` execute or enter (a
    directory to read is entered too)."""

    what: str
    path: Path
    access: str


def service_user_notes(user: str, needed: Sequence[Needed]) -> list[str]:
    """Lines for the operator: how to create `user`, or which of `needed` it cannot reach."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return [
            f"note: user {user!r} does not exist on this host; create it first:",
            f"  useradd --system --user-group --home-dir /var/lib/vllm-gate --shell /usr/sbin/nologin {user}",
            f"  (and `usermod -aG video {user}` where /dev/nvidia* are not world-writable)",
        ]
    if entry.pw_uid == 0:
        return []
    groups = {entry.pw_gid, *(g.gr_gid for g in grp.getgrall() if user in g.gr_mem)}
    blocked = [f"  {n.what} {n.path}: {why}" for n in needed if (why := _blocked(n, entry.pw_uid, groups))]
    if not blocked:
        return []
    return [
        f"note: user {user!r} cannot reach what the unit needs (judged from mode bits):",
        *blocked,
        "  move it where the user can (e.g. a venv under /opt), fix the modes, or choose --user",
    ]


def launch_needs(launch: Path) -> list[Needed]:
    """The `launch` script and the Python its `#!` line names (a venv's python links to a pyenv or
    a home-directory build as often as to /usr/bin)."""
    needed = [Needed("the launch executable", launch, "rx")]
    try:
        with launch.open("rb") as script:
            first = script.readline(4096)
    except OSError:
        return needed
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if words and words[0].startswith("/"):
        needed.append(Needed("its interpreter", Path(words[0]), "rx"))
    return needed


def _blocked(needed: Needed, uid: int, groups: set[int]) -> str:
    """Why `uid` cannot reach `needed.path`, or "" (also when it cannot be told: a path not there)."""
    path = Path(os.path.realpath(needed.path))  # a link's target is what the user must reach
    via = f"(it is {path}) " if path != Path(os.path.abspath(needed.path)) else ""
    for parent in reversed(path.parents):
        if not _may(parent, uid, groups, "x"):
            return f"{via}cannot enter {parent} ({_mode(parent)})"
    if not _may(path, uid, groups, needed.access):
        return f"{via}needs {needed.access} on it ({_mode(path)})"
    return ""


def _may(path: Path, uid: int, groups: set[int], access: str) -> bool:
    try:
        info = path.stat()
    except OSError:
        return True  # nothing to judge: the start will name it
    if stat.S_ISDIR(info.st_mode) and "r" in access and "x" not in access:
        access += "x"
    if info.st_uid == uid:
        bits = {"r": stat.S_IRUSR, "w": stat.S_IWUSR, "x": stat.S_IXUSR}
    elif info.st_gid in groups:
        bits = {"r": stat.S_IRGRP, "w": stat.S_IWGRP, "x": stat.S_IXGRP}
    else:
        bits = {"r": stat.S_IROTH, "w": stat.S_IWOTH, "x": stat.S_IXOTH}
    return all(info.st_mode & bits[a] for a in access)


def _mode(path: Path) -> str:
    """`drwx------ root:root`, as `ls -l` shows the mode that blocks."""
    info = path.stat()
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    return f"{stat.filemode(info.st_mode)} {owner}:{group}"
