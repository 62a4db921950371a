"""The KV-pool report: how many full-length requests the last run's KV pool holds vs what is asked."""

from __future__ import annotations

from typing import Any

from launcher.profile.semantics import human_int


def kv_pool_report(args: dict[str, Any], facts: dict[str, Any] | None) -> str | None:
    """e.g. "KV pool 17,794,448 tokens = 33.9× what 8 full-length requests need (65,536 tokens each)"."""
    if not facts or not isinstance(facts.get("kv_cache_tokens"), int):
        return None
    pool = facts["kv_cache_tokens"]
    norm = {k.replace("-", "_"): v for k, v in args.items()}
    max_len = human_int(norm.get("max_model_len"))
    if max_len is None:
        concurrency = facts.get("max_concurrency") or {}
        max_len = concurrency.get("max_model_len") if isinstance(concurrency, dict) else None
    seqs = human_int(norm.get("max_num_seqs"))
    if not max_len or not seqs:
        return f"KV pool {pool:,} tokens (last run); max_model_len × max_num_seqs unknown here"
    need = max_len * seqs
    return (
        f"KV pool {pool:,} tokens (last run) = {pool / need:.1f}× what {seqs} full-length requests need "
        f"({max_len:,} tokens each)"
    )
