"""Which `vllm serve` schema applies on this host: the installed vLLM's, else the committed snapshot.

The schema's format and the snapshot live in `vllm_flags`, which the simulator shares; reading the
installed vLLM (and keeping what was read in the launcher's cache, `schema_cache`) is the launcher's
own business.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from vllm_flags.schema import VllmSchema, load_snapshot


@cache
def load_installed() -> VllmSchema | None:
    """Read the schema from the vLLM importable here, or None when there is none.

    Importing vLLM pulls torch and takes seconds (23 s on the GPU machine), so this runs only when
    vLLM is importable, and its result is kept on disk for the next run (`schema_cache`).
    """
    from launcher.profile import schema_cache

    key = _installed_key()
    if key is None:
        return None
    cached = _cached(key)
    if cached is not None:
        return cached
    try:
        from vllm_flags import schema_extract

        data = schema_extract.schema_from_installed_vllm()
    except Exception:  # a broken vLLM install must not stop a dry run: fall back to the snapshot
        return None
    schema_cache.write(key, data)
    return VllmSchema.from_json(data, origin=f"installed vllm {data['vllm_version']}")


def load_without_importing() -> VllmSchema:
    """The installed vLLM's schema where a run before kept it in the cache, else the snapshot; never
    imports vLLM (seconds): what shell completion reads on every <TAB>."""
    key = _installed_key()
    cached = _cached(key) if key is not None else None
    return cached if cached is not None else load_snapshot()


def _installed_key() -> str | None:
    """The cache key of the vLLM importable here (found, not imported), or None when there is none."""
    import importlib.util

    from launcher.profile import schema_cache

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return schema_cache.key_for(Path(next(iter(spec.submodule_search_locations))))


def _cached(key: str) -> VllmSchema | None:
    from launcher.profile import schema_cache

    data = schema_cache.read(key)
    if data is None:
        return None
    return VllmSchema.from_json(data, origin=f"installed vllm {data['vllm_version']} (cached {key})")


def load_schema(prefer_installed: bool = True) -> VllmSchema:
    """The installed vLLM's schema when there is one, else the committed snapshot."""
    installed = load_installed() if prefer_installed else None
    return installed if installed is not None else load_snapshot()
