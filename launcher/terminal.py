"""What the operator's terminal wants: colour unless `NO_COLOR` is set (https://no-color.org)."""

from __future__ import annotations

import os


def colour_allowed() -> bool:
    """False when `NO_COLOR` is set to anything but the empty string, as the convention says."""
    return not os.environ.get("NO_COLOR")
