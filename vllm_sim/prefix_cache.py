"""A block-level prefix cache: full blocks of prompt token ids, chain-hashed, kept in LRU order.

Like vLLM's: only full blocks are cached, a block's hash covers every token before it (so nested
prefixes hit and a changed token misses everything after it), and a fully cached prompt still
recomputes its last token, so at most `len - 1` tokens rounded down to blocks are hits.

`mark_stale()` is what a sleep that did not clear the cache leaves (`--sim-wake-fault stale-cache`):
the blocks are still indexed but their KV content is gone, so a prompt that hits one reads garbage
until `reset()` (`POST /reset_prefix_cache`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


class PrefixCache:
    def __init__(self, block_size: int, capacity_blocks: int) -> None:
        self.block_size = block_size
        self.capacity_blocks = max(1, capacity_blocks)
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self._stale: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._blocks)

    def block_hashes(self, ids: list[int]) -> list[bytes]:
        hashes: list[bytes] = []
        parent = b""
        for start in range(0, len(ids) - self.block_size + 1, self.block_size):
            block = ids[start : start + self.block_size]
            digest = hashlib.blake2b(parent + b"".join(i.to_bytes(4, "big") for i in block), digest_size=16)
            parent = digest.digest()
            hashes.append(parent)
        return hashes

    def lookup(self, ids: list[int]) -> int:
        """Cached prompt tokens for this prompt (touching the hit blocks)."""
        limit = (len(ids) - 1) // self.block_size
        hits = 0
        for digest in self.block_hashes(ids)[:limit]:
            if digest not in self._blocks:
                break
            self._blocks.move_to_end(digest)
            hits += 1
        return hits * self.block_size

    def hits_stale(self, ids: list[int]) -> bool:
        """Whether the blocks this prompt would hit include one whose KV content is gone."""
        if not self._stale:
            return False
        limit = (len(ids) - 1) // self.block_size
        for digest in self.block_hashes(ids)[:limit]:
            if digest not in self._blocks:
                return False
            if digest in self._stale:
                return True
        return False

    def mark_stale(self) -> None:
        self._stale = set(self._blocks)

    def insert(self, ids: list[int]) -> None:
        for digest in self.block_hashes(ids):
            self._blocks[digest] = None
            self._blocks.move_to_end(digest)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def reset(self) -> None:
        self._blocks.clear()
        self._stale.clear()
