"""vLLM writes `VLLM_API_KEY` into its torch.compile cache: warn when others can read that cache.

Measured on the H200 with vLLM 0.26.0: `~/.cache/vllm/torch_compile_cache/<hash>/.../
cache_key_factors.json` records the environment that keys the cache, the API key included, with
mode 0644 under directories others may enter. The cache root is `VLLM_CACHE_ROOT`, else
`$XDG_CACHE_HOME/vllm`, else `~/.cache/vllm`. Only a warning: the start is not at risk, the key is.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from launcher.host.report import CheckName, CheckResult, ok, skipped, warned

FACTORS = "cache_key_factors.json"
_MAX_FILES = 200  # enough to judge; a huge cache is not walked whole on every start


def cache_root(env: Mapping[str, str]) -> Path:
    if env.get("VLLM_CACHE_ROOT"):
        return Path(env["VLLM_CACHE_ROOT"]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vllm"


def readable_by_others(root: Path) -> list[Path]:
    """Cache files holding the key factors that a user other than the owner may read."""
    found: list[Path] = []
    compile_cache = root / "torch_compile_cache"
    if not compile_cache.is_dir():
        return found
    for count, path in enumerate(compile_cache.rglob(FACTORS)):
        if count >= _MAX_FILES:
            break
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if mode & (stat.S_IRGRP | stat.S_IROTH) and _enterable(path.parent, root):
            found.append(path)
    return found


def _enterable(directory: Path, root: Path) -> bool:
    """Every directory from the cache root down lets group or others through."""
    for part in (directory, *directory.parents):
        try:
            if not part.stat().st_mode & (stat.S_IXGRP | stat.S_IXOTH):
                return False
        except OSError:
            return False
        if part == root:
            return True
    return True


def check_compile_cache(env: Mapping[str, str], uses_key: bool) -> CheckResult:
    if not uses_key:
        return skipped(CheckName.COMPILE_CACHE, "no API key configured (engine.api_key_env)")
    root = cache_root(env)
    exposed = readable_by_others(root)
    if exposed:
        return warned(
            CheckName.COMPILE_CACHE,
            f"vLLM's torch.compile cache records VLLM_API_KEY and {len(exposed)} such file(s) under {root} "
            f"are readable by other users (first: {exposed[0]})",
            f"`chmod -R go-rwx {root}`, or give vLLM VLLM_CACHE_ROOT in a directory only its user can read",
            files=[str(p) for p in exposed[:10]],
        )
    return ok(CheckName.COMPILE_CACHE, f"no key-bearing compile cache readable by others under {root}")
