"""The installed vLLM's flag schema, kept on disk between runs.

Reading it means importing vLLM, which imports torch: 23 s per `launch preflight`, dry run, `set`
and start on the GPU machine (vLLM 0.26.0, docs/real-vllm.md). The schema only changes when vLLM
does, so it is kept under a key made from the installed package without importing it: its version,
its location, and the size and mtime of the files that declare the flags and env names. A vLLM
upgrade, or an edit to a fork's `arg_utils.py`, makes a new key.

Where: `$VLLM_GATE_CACHE`, else `$XDG_CACHE_HOME/vllm-gate`, else `~/.cache/vllm-gate`. A cache that
cannot be read or written is skipped: the schema is then read from vLLM, as without a cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic

# Where `vllm serve`'s flags and env names are declared (0.26 and 0.33 layouts): relative to the package.
FLAG_SOURCES = (
    "engine/arg_utils.py",
    "entrypoints/openai/cli_args.py",
    "entrypoints/common/cli_args.py",
    "envs.py",
    "tool_parsers/__init__.py",
    "entrypoints/openai/tool_parsers/__init__.py",
    "reasoning/__init__.py",
)
FLAG_SOURCE_DIRS = ("config",)
# What a cached schema holds: raised when `schema_extract.normalize` learns more, so a schema kept by
# an older launcher (before 2: without `metavar_choices`) is read again instead of silently lacking it.
SCHEMA_REVISION = 2


def cache_dir() -> Path:
    if os.environ.get("VLLM_GATE_CACHE"):
        return Path(os.environ["VLLM_GATE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vllm-gate"


def key_for(package_dir: Path) -> str:
    """A name for this installed vLLM's schema, computed without importing vLLM."""
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH
        version = "unknown"
    files = [package_dir / name for name in FLAG_SOURCES]
    for name in FLAG_SOURCE_DIRS:
        files += sorted((package_dir / name).glob("*.py"))
    identity = f"{version}\0{package_dir.resolve()}\0{sys.version_info[:2]}\0{SCHEMA_REVISION}"
    digest = hashlib.sha256(identity.encode())
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        digest.update(f"\0{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"vllm-{version}-{digest.hexdigest()[:16]}"


def read(key: str) -> dict[str, Any] | None:
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "options" in data else None


def write(key: str, data: dict[str, Any]) -> None:
    try:
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / f"{key}.json", json.dumps(data, sort_keys=True) + "\n", follow_links=True)
    except OSError:
        pass  # read-only home, full disk: the next run reads vLLM again
