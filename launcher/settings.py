"""Where profiles and state live: flags, then environment, then defaults (resolved once, at the CLI)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    profiles_dir: Path
    state_dir: Path

    @classmethod
    def resolve(cls, profiles_dir: Path | None = None, state_dir: Path | None = None) -> GlobalOptions:
        # resolved once: the state dir itself may be a link (an operator's choice of disk); below it no
        # link is ever followed (launcher/atomicfile.py, docs/host-safety.md "Symbolic links")
        state = state_dir or _env_path("VLLM_GATE_STATE") or default_state_dir()
        return cls(
            profiles_dir=profiles_dir or _env_path("VLLM_GATE_PROFILES") or Path("profiles"),
            state_dir=Path(os.path.realpath(state)),
        )


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def default_state_dir() -> Path:
    """/var/lib/vllm-gate as root (systemd), else $XDG_STATE_HOME/vllm-gate."""
    if os.geteuid() == 0:
        return Path("/var/lib/vllm-gate")
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "vllm-gate"
