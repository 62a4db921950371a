"""What the operator's terminal wants: colour unless `NO_COLOR` is set (https://no-color.org);
and whether a stream is systemd's journal, which reads a `<N>` priority prefix on each line."""

from __future__ import annotations

import io
import os
from typing import TextIO


def colour_allowed() -> bool:
    """False when `NO_COLOR` is set to anything but the empty string, as the convention says."""
    return not os.environ.get("NO_COLOR")


def is_journal(stream: TextIO) -> bool:
    """systemd sets JOURNAL_STREAM to `device:inode` of the unit's stdout/stderr stream; a stream
    redirected elsewhere has another inode, even though it inherited the variable."""
    wanted = os.environ.get("JOURNAL_STREAM", "")
    if not wanted:
        return False
    try:
        stat = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return wanted == f"{stat.st_dev}:{stat.st_ino}"
