"""Compare a client's per-request timestamps with vllm-sim's ground truth (`--sim-ground-truth`).

The sim writes, per request, `arrival_*` (when its handler had parsed the request), `first_token_*`
and one `[mono, wall]` pair per output token (tokens of one chunk share their chunk's write time),
on both clocks. Chunk times are the distinct consecutive stamps. Per request:
    true TTFT   = truth first-token write - client send  (the request's real life, intake included)
    TTFT error  = client TTFT - true TTFT = client first-token stamp - truth first-token write
    ITL error   = client gap_i - truth gap_i              (chunk gaps, matched in order)
    ITL mean    = client (last - first) / (n - 1) - the same from the truth (for tools that only
                  report a per-request mean ITL)
    delivery    = client stamp of chunk i - truth write of chunk i
    intake      = truth arrival - client send             (the server's time to accept and parse the
                                                          request; a tool that stamps its send early
                                                          shows a larger intake than one that does not)
    vs sim TTFT = |client TTFT - (truth first token - truth arrival)|  (the naive comparison: it
                                                          charges the server's intake to the client)
Our client stamps on CLOCK_MONOTONIC (`*_mono`); tools that stamp wall time use `*_wall`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["id"]] = row
    return rows


def chunk_times(row: dict[str, Any], clock: str = "mono") -> list[float]:
    index = 0 if clock == "mono" else 1
    out: list[float] = []
    for stamp in row["tokens"]:
        if not out or stamp[index] != out[-1]:
            out.append(stamp[index])
    return out


@dataclass(slots=True)
class Errors:
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    itl_mean: list[float] = field(default_factory=list)
    delivery: list[float] = field(default_factory=list)
    intake: list[float] = field(default_factory=list)
    naive: list[float] = field(default_factory=list)
    matched: int = 0
    unmatched: int = 0
    count_mismatch: int = 0

    def add(
        self,
        row: dict[str, Any] | None,
        *,
        t_send: float,
        first: float,
        clock: str = "mono",
        chunks: Sequence[float] | None = None,
        itl_mean: float | None = None,
    ) -> None:
        """One request: its send and first-token stamps, and its chunk stamps or its mean ITL."""
        if row is None:
            self.unmatched += 1
            return
        truth = chunk_times(row, clock)
        if not truth:
            self.unmatched += 1
            return
        self.matched += 1
        self.ttft.append(first - truth[0])
        self.intake.append(row[f"arrival_{clock}"] - t_send)
        self.naive.append((first - t_send) - (truth[0] - row[f"arrival_{clock}"]))
        truth_mean = (truth[-1] - truth[0]) / (len(truth) - 1) if len(truth) > 1 else None
        if chunks is not None:
            if len(chunks) != len(truth):
                self.count_mismatch += 1
            n = min(len(truth), len(chunks))
            self.delivery += [chunks[i] - truth[i] for i in range(n)]
            self.itl += [(chunks[i] - chunks[i - 1]) - (truth[i] - truth[i - 1]) for i in range(1, n)]
            if len(chunks) > 1:
                itl_mean = (chunks[-1] - chunks[0]) / (len(chunks) - 1)
        if itl_mean is not None and truth_mean is not None:
            self.itl_mean.append(itl_mean - truth_mean)

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.matched,
            "unmatched": self.unmatched,
            "count_mismatch": self.count_mismatch,
            "ttft_mae_ms": _mae(self.ttft),
            "ttft_p90_abs_ms": _p90(self.ttft),
            "itl_mae_ms": _mae(self.itl),
            "itl_p90_abs_ms": _p90(self.itl),
            "itl_mean_mae_ms": _mae(self.itl_mean),
            "delivery_median_ms": _med(self.delivery),
            "intake_median_ms": _med(self.intake),
            "vs_sim_ttft_mae_ms": _mae(self.naive),
        }


def _ms(values: Iterable[float]) -> list[float]:
    return [abs(v) * 1000 for v in values]


def _mae(values: list[float]) -> float | None:
    return statistics.median(_ms(values)) if values else None


def _med(values: list[float]) -> float | None:
    return statistics.median(values) * 1000 if values else None


def _p90(values: list[float]) -> float | None:
    data = sorted(_ms(values))
    return data[int(0.9 * (len(data) - 1))] if data else None
