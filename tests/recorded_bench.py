"""A recorded `launch bench` run read back (requests.jsonl.gz as the H200 sessions keep it), and the
degenerate detector applied again to its real answers: shared by the tests that re-judge sessions."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from launcher.bench import checks, repetition

Cells = dict[tuple[str, int], list[dict[str, Any]]]


def read_cells(requests_gz: Path, phase: str = "timed") -> Cells:
    """(context, concurrency) -> the cell's recorded requests of `phase`, in recorded order."""
    cells: Cells = defaultdict(list)
    with gzip.open(requests_gz, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["phase"] == phase:
                cells[(record["context"], record["concurrency"])].append(record)
    return cells


def rescore(records: list[dict[str, Any]]) -> tuple[list[float | None], checks.Finding | None]:
    """The successful answers' distinct-trigram scores, recomputed, and the finding they make."""
    scores = [repetition.distinct_ngram_ratio(r["content"]) for r in records if r["status"] == 200]
    return scores, checks.degenerate(scores, sum(1 for s in scores if repetition.is_degenerate(s)))
