"""Which of a profile's `.bak_<tag>` snapshots go when `launch set` keeps the newest `keep`.

One snapshot a change piled up in `profiles/` and none was ever removed (issue 44). The newest
`keep` stay (by when each was written); beyond them, a snapshot the caller spares stays too (the
one just written, and those a rollback would still want: `launcher/commands/snapshot_pruning.py`).
Only plain files directly in the profiles dir, named as `bak_path` names them, are considered: a
link is never followed nor removed, and nothing outside the profiles dir is touched.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from launcher.profile.snapshots import snapshot_files


def beyond_keep(profiles_dir: Path, profile: str, keep: int, *, adding: Path | None = None) -> list[Path]:
    """The snapshots past the newest `keep`; `adding`: a snapshot about to be written (a dry run),
    counted as the newest."""
    files = [path for path in snapshot_files(profiles_dir, profile) if path != adding]
    return files[keep - 1 :] if adding is not None else files[keep:]


def prune_snapshots(profiles_dir: Path, profile: str, keep: int, spare: Callable[[Path], bool]) -> list[Path]:
    """Remove the snapshots past the newest `keep` that `spare` does not keep; returns what was removed
    (one that cannot be removed is left, and the command goes on)."""
    removed = []
    for path in beyond_keep(profiles_dir, profile, keep):
        if spare(path):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)  # a link put there since is removed itself, never followed
            removed.append(path)
    return removed
