"""The KV-pool report: how many full-length requests the last run's KV pool holds vs what is asked.

Below 1× the pool cannot hold `max_num_seqs` requests at `max_model_len` at once: at full length
vLLM queues or preempts them, so the report warns rather than printing a bare "0.8×".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.profile.semantics import human_int


@dataclass(frozen=True, slots=True)
class KvPool:
    pool_tokens: int
    max_model_len: int | None
    max_num_seqs: int | None

    @property
    def need_tokens(self) -> int | None:
        return self.max_model_len * self.max_num_seqs if self.max_model_len and self.max_num_seqs else None

    @property
    def ratio(self) -> float | None:
        need = self.need_tokens
        return self.pool_tokens / need if need else None

    @property
    def full_length_requests(self) -> int | None:
        """How many requests at `max_model_len` the pool holds at once."""
        return self.pool_tokens // self.max_model_len if self.max_model_len else None

    def line(self) -> str:
        """e.g. "KV pool 17,794,448 tokens (last run) = 33.9× what 8 full-length requests need (…)"."""
        if self.ratio is None:
            return (
                f"KV pool {self.pool_tokens:,} tokens (last run); max_model_len × max_num_seqs unknown here"
            )
        return (
            f"KV pool {self.pool_tokens:,} tokens (last run) = {self.ratio:.1f}× what {self.max_num_seqs} "
            f"full-length requests need ({self.max_model_len:,} tokens each)"
        )

    @property
    def warning(self) -> str | None:
        if self.ratio is None or self.ratio >= 1.0:
            return None
        held = self.full_length_requests
        return (
            f"the KV pool holds only {held} of max_num_seqs {self.max_num_seqs} requests at "
            f"max_model_len {self.max_model_len:,} ({self.ratio:.2f}×): at full length the rest queue or are "
            "preempted; raise gpu_memory_utilization, or lower max_num_seqs or max_model_len"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "pool_tokens": self.pool_tokens,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "need_tokens": self.need_tokens,
            "ratio": self.ratio,
            "full_length_requests": self.full_length_requests,
            "source": "last run",
            "text": self.line(),
            "warning": self.warning,
        }


def kv_pool(args: dict[str, Any], facts: dict[str, Any] | None) -> KvPool | None:
    """The pool the last run logged, against this plan's max_model_len × max_num_seqs."""
    if not facts or not isinstance(facts.get("kv_cache_tokens"), int):
        return None
    norm = {k.replace("-", "_"): v for k, v in args.items()}
    max_len = human_int(norm.get("max_model_len"))
    if max_len is None:
        concurrency = facts.get("max_concurrency") or {}
        max_len = concurrency.get("max_model_len") if isinstance(concurrency, dict) else None
    return KvPool(facts["kv_cache_tokens"], max_len, human_int(norm.get("max_num_seqs")))
