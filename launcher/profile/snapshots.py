"""`.bak_<tag>` snapshots of a profile file, and the `.replaced-<time>` copies a rollback leaves.

The operator's habit (`cp start.sh start.sh.bak_gdn`, later `cp start.sh.bak_gdn start.sh`) made
safe: a snapshot is a byte-identical copy written atomically, an existing one is never overwritten
silently, and a rollback keeps the file it replaces, so no edit is lost to a rollback. Both pile up,
one per change: `launch set` keeps the newest `KEPT` (`--keep`) of a profile's snapshots, sparing the
ones still in use (`launcher/profile/pruning.py`), and `set` and `rollback` the newest `KEPT`
`.replaced-<time>` copies.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import psutil

from launcher.atomicfile import remove_stray_temps, write_atomic
from launcher.errors import BadInput
from launcher.profile.loader import PROFILE_SUFFIX

TAG_RE = re.compile(r"\A[A-Za-z0-9_.-]{1,64}\Z")  # `$` would accept a trailing newline
BAK_MARK = ".bak_"
REPLACED_MARK = ".replaced-"
KEPT = 20  # snapshots and `.replaced-` copies kept per profile (`launch set --keep`)
_REPLACED_STAMP = re.compile(r"\A(\d{8}T\d{6}Z)(?:-(\d{1,6}))?\Z")  # what `replaced_path` writes


def check_tag(tag: str) -> str:
    if not TAG_RE.match(tag) or tag in (".", ".."):
        raise BadInput(
            f"invalid tag {tag!r}: a tag names the file PROFILE.toml.bak_TAG",
            hint="use 1-64 letters, digits, '_', '-' or '.', for example --tag gdn_off",
        )
    return tag


def bak_path(profiles_dir: Path, profile: str, tag: str) -> Path:
    return profiles_dir / f"{profile}{PROFILE_SUFFIX}{BAK_MARK}{tag}"


def available_tags(profiles_dir: Path, profile: str) -> list[str]:
    """Tags of the profile's snapshots, newest first (a link to a file counts: rollback refuses it)."""
    prefix = f"{profile}{PROFILE_SUFFIX}{BAK_MARK}"
    return [p.name[len(prefix) :] for p in snapshot_files(profiles_dir, profile, links=True)]


def snapshot_files(profiles_dir: Path, profile: str, *, links: bool = False) -> list[Path]:
    """The profile's `.bak_<tag>` files, newest first (by mtime); a link to a file only with `links`
    (pruning never takes one); a dir or an entry that cannot be read has none."""
    prefix = f"{profile}{PROFILE_SUFFIX}{BAK_MARK}"
    found: list[tuple[float, str]] = []
    with contextlib.suppress(OSError), os.scandir(profiles_dir) as entries:
        for entry in entries:
            if not entry.name.startswith(prefix) or not TAG_RE.match(entry.name[len(prefix) :]):
                continue
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=links):
                    found.append((entry.stat(follow_symlinks=links).st_mtime, entry.name))
    return [profiles_dir / name for _, name in sorted(found, reverse=True)]


def refuse_existing(bak: Path) -> BadInput:
    saved = datetime.fromtimestamp(bak.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return BadInput(
        f"{bak} already exists (saved {saved}); a snapshot is never overwritten silently, so nothing "
        "was changed",
        hint="pick another --tag, or pass --force-tag to replace that snapshot",
    )


def save_snapshot(profile_file: Path, bak: Path, *, force: bool) -> None:
    """Copy the profile to its `.bak_<tag>`, byte for byte, with the profile's permissions."""
    if bak.exists() and not force:
        raise refuse_existing(bak)
    write_atomic(bak, profile_file.read_bytes(), mode=_mode(profile_file), follow_links=True)


def save_and_write(profile_file: Path, bak: Path, text: str, *, force: bool) -> None:
    """`save_snapshot`, then the edited profile; on a full or read-only dir the snapshot made here
    is removed again and BadInput says so: all or nothing, and a retry with the same tag works."""
    _tidy(profile_file)
    previous = bak.read_bytes() if bak.exists() else None
    try:
        save_snapshot(profile_file, bak, force=force)
        write_atomic(profile_file, text, follow_links=True)
    except OSError as err:
        with contextlib.suppress(OSError):
            if previous is None:
                bak.unlink(missing_ok=True)
            elif bak.read_bytes() != previous:
                write_atomic(bak, previous, follow_links=True)
        raise _cannot_write(err, profile_file) from err


def restore_snapshot(profile_file: Path, bak: Path, now: datetime) -> Path | None:
    """Put the snapshot back; the file it replaces is written first, as `.replaced-<UTC time>`."""
    _tidy(profile_file)
    data = bak.read_bytes()
    kept: Path | None = None
    mode = _mode(profile_file) if profile_file.exists() else _mode(bak)
    try:
        if profile_file.exists():
            kept = replaced_path(profile_file, now)
            write_atomic(kept, profile_file.read_bytes(), mode=mode, follow_links=True)
        write_atomic(profile_file, data, mode=mode, follow_links=True)
    except OSError as err:
        if kept is not None:
            with contextlib.suppress(OSError):
                kept.unlink(missing_ok=True)
        raise _cannot_write(err, profile_file) from err
    return kept


def _cannot_write(err: OSError, profile_file: Path) -> BadInput:
    return BadInput(
        f"cannot write {err.filename or profile_file}: {err.strerror or err}; nothing was changed "
        f"({profile_file.name} and its snapshots are as they were)",
        hint="free space in, or make writable, the profiles dir, then run the same command again",
    )


def _tidy(profile_file: Path) -> None:
    """Temp files a killed `set`/`rollback` left beside the profile (or its symlink's target)."""
    for directory in {profile_file.parent, profile_file.resolve().parent}:
        remove_stray_temps(directory, psutil.pid_exists)


def replaced_path(profile_file: Path, now: datetime) -> Path:
    """`prod.toml.replaced-20260917T101500Z`; `-2`, `-3`… when that second is taken already."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate = profile_file.with_name(f"{profile_file.name}{REPLACED_MARK}{stamp}")
    serial = 1
    while candidate.exists():
        serial += 1
        candidate = profile_file.with_name(f"{profile_file.name}{REPLACED_MARK}{stamp}-{serial}")
    return candidate


def replaced_copies(profile_file: Path) -> list[Path]:
    """This profile's `.replaced-<time>` copies, oldest first by the time in their names (not mtime);
    only plain files (never a link) named exactly as `replaced_path` names them."""
    prefix = profile_file.name + REPLACED_MARK
    copies: list[tuple[tuple[str, int], Path]] = []
    for path in profile_file.parent.glob(f"{glob.escape(prefix)}*"):
        match = _REPLACED_STAMP.match(path.name[len(prefix) :])
        if match is not None and path.is_file() and not path.is_symlink():
            copies.append(((match.group(1), int(match.group(2) or 1)), path))
    return [path for _, path in sorted(copies)]


def prune_replaced(profile_file: Path, keep: int = KEPT) -> list[Path]:
    """Remove all but the newest `keep` `.replaced-<time>` copies of this profile. Returns what was
    removed; a copy that cannot be removed is left, and the command goes on."""
    copies = replaced_copies(profile_file)
    removed = []
    for path in copies[: max(0, len(copies) - keep)]:
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777
