"""A launcher bug becomes a file, not only a traceback: what the operator attaches to an issue.

`launch` exits 70 (EX_SOFTWARE) on an unexpected exception so a script can tell a bug from a failed
gate (1). The report carries what a maintainer needs (versions, the command line, the traceback)
and no secret: argv goes through `redact_argv`, the whole text through a `LineRedactor` that knows
the secret values of the environment and those argv assigns (`launch set … env.VLLM_API_KEY=…`).
vLLM's version comes from package metadata: importing vLLM would import torch (seconds, and a GPU
probe) inside an error path.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from launcher.atomicfile import write_atomic
from launcher.redact import LineRedactor, assigned_secrets, redact_argv, secret_values
from launcher.state.store import BUG_REPORTS, StateStore

PACKAGES = ("vllm-gate", "click", "structlog", "psutil", "vllm")


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def render_report(error: BaseException, argv: Sequence[str], now: float) -> str:
    """The report's text, secrets masked."""
    lines = [
        "vllm-gate bug report (launch exited 70: an unexpected error, not an operator error)",
        f"time: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))}",
        f"python: {platform.python_version()} ({sys.executable})",
        f"platform: {platform.platform()}",
        *(f"{name}: {package_version(name)}" for name in PACKAGES),
        f"command: {' '.join(redact_argv(list(argv)))}",
        "",
        "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip("\n"),
    ]
    redactor = LineRedactor([*secret_values(os.environ), *assigned_secrets(argv)])
    return "\n".join(redactor(line) for line in "\n".join(lines).split("\n")) + "\n"


def write_bug_report(error: BaseException, argv: Sequence[str], state_dir: Path | None) -> Path:
    """Write the report into STATE/bug-reports/, or a temp dir when the state dir cannot take it."""
    now = time.time()
    text = render_report(error, argv, now)
    name = f"bug-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}-{os.getpid()}.txt"
    candidates = [StateStore(state_dir).bug_reports_dir] if state_dir is not None else []
    candidates.append(Path(tempfile.gettempdir()) / f"vllm-gate-{BUG_REPORTS}")
    for directory in candidates:
        try:
            write_atomic(directory / name, text, mode=0o600)
            return directory / name
        except OSError:
            continue
    raise OSError(f"no writable directory for a bug report among {', '.join(map(str, candidates))}")
