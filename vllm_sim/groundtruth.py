"""The ground-truth log: one JSON line per finished request, written before the stream's `[DONE]`.

Fields: id (the response `id`), endpoint, stream, finish_reason, prompt_tokens, cached_tokens,
output_tokens (= usage.completion_tokens, the EOS included), reasoning_tokens, arrival/first_token/
finish as monotonic (`*_mono`) and wall (`*_wall`) seconds, and `tokens`: one [mono, wall] pair per
output token: when the chunk carrying it was written to the socket (streaming), or when the engine
step produced it (non-streaming). Tokens of one engine step share one chunk, hence one time.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class TruthRow:
    """Collected while a request is served (mutable), written once at its end."""

    id: str
    endpoint: str
    stream: bool
    arrival_mono: float = field(default_factory=time.monotonic)
    arrival_wall: float = field(default_factory=time.time)
    tokens: list[tuple[float, float]] = field(default_factory=list)

    def stamp(self, count: int) -> None:
        mono, wall = time.monotonic(), time.time()
        self.tokens.extend([(mono, wall)] * count)

    def as_dict(
        self,
        *,
        finish_reason: str,
        prompt_tokens: int,
        cached_tokens: int,
        output_tokens: int,
        reasoning_tokens: int,
    ) -> dict[str, Any]:
        first = self.tokens[0] if self.tokens else (None, None)
        last = self.tokens[-1] if self.tokens else (time.monotonic(), time.time())
        return {
            "id": self.id,
            "endpoint": self.endpoint,
            "stream": self.stream,
            "finish_reason": finish_reason,
            "prompt_tokens": prompt_tokens,
            "cached_tokens": cached_tokens,
            "output_tokens": output_tokens,
            "reasoning_tokens": reasoning_tokens,
            "arrival_mono": self.arrival_mono,
            "arrival_wall": self.arrival_wall,
            "first_token_mono": first[0],
            "first_token_wall": first[1],
            "finish_mono": last[0],
            "finish_wall": last[1],
            "tokens": [list(t) for t in self.tokens],
        }


class GroundTruth:
    """Appends rows to `--sim-ground-truth PATH` (one `os.write` per row, flushed)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._fd: int | None = None

    def open(self) -> None:
        if self.path:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, row: dict[str, Any]) -> None:
        if self._fd is not None:
            os.write(self._fd, (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
