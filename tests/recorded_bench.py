"""A recorded `launch bench` run read back (requests.jsonl.gz as the H200 sessions keep it), and the
degenerate detector applied again to its real answers: shared by the tests that re-judge sessions."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from launcher.bench import checks, repetition

Cells = dict[tuple[str, int], list[dict[str, Any]]]

# A Latin letter touching a CJK character (`become秋天和冬天`). The recordings scored such answers while
# a word still ran on through the CJK characters after it; the score now splits them, so only these
# answers score differently from their recording (launcher/bench/repetition.py).
_GLUED = re.compile(r"[A-Za-z][\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def glued(text: str) -> bool:
    return _GLUED.search(text) is not None


def scored_as_recorded(records: list[dict[str, Any]], scores: list[float | None]) -> bool:
    """The rescored answers agree with their recording wherever no Latin letter touches a CJK character,
    and every answer is degenerate or not as recorded."""
    for record, score in zip(records, scores, strict=True):
        if score != record["content_score"] and not glued(record["content"]):
            return False
        if repetition.is_degenerate(score) != repetition.is_degenerate(record["content_score"]):
            return False
    return True


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


def degenerate_message(flagged: int, scored: int, lowest: float) -> str:
    return (
        f"{flagged}/{scored} answers degenerate (distinct-trigram ratio as low as {lowest:.2f}); "
        "degenerate text decodes faster, so tok/s is inflated"
    )
