"""The parser against real logs: ≥ 98% of the fields read by hand, over every release in the corpus
(tests/log_corpus.py; `python -m tests.log_corpus` prints the per-release table and each miss)."""

from __future__ import annotations

import json
import re

import pytest

from tests import log_corpus as corpus

BAR = 0.98


@pytest.fixture(scope="module")
def judged() -> dict[str, tuple[corpus.Fixture, list[corpus.Field]]]:
    return corpus.judge_all()


def _share(rows: list[list[corpus.Field]]) -> float:
    fields = [f for row in rows for f in row]
    return sum(f.right for f in fields) / len(fields)


def test_the_corpus_spans_releases_and_kinds() -> None:
    fixtures = corpus.fixtures()
    public = [f for f in fixtures if f.kind == "public"]
    assert len(public) >= 50 and len(fixtures) >= 80
    families = {corpus.family(f.release) for f in public}
    assert {"0.5", "0.6", "0.7", "0.8", "0.9", "0.10", "0.11", "0.2x"} <= families, families
    kinds = {f.facts.get("failure_kind") for f in public}
    assert {"argument", "kv_cache_too_small", "free_memory", "engine_init", "tool_parser"} <= kinds


def test_every_public_fixture_names_its_source_and_release() -> None:
    for path in sorted(corpus.PUBLIC.glob("*.json")):
        data = json.loads(path.read_text())
        assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$", data["source"]), path.name
        assert data["release"] and data["release_basis"] and data["facts"], path.name
        assert path.with_suffix(".log").is_file(), path.name
        assert set(data.get("inferred", {})) <= set(data["facts"]), path.name


def test_public_logs_are_read_to_the_bar(
    judged: dict[str, tuple[corpus.Fixture, list[corpus.Field]]],
) -> None:
    rows = [fields for fixture, fields in judged.values() if fixture.kind == "public"]
    misses = [f for row in rows for f in row if not f.right]
    assert _share(rows) >= BAR, "\n".join(f"{f.fixture} {f.key}: {f.want!r} != {f.got!r}" for f in misses)


def test_the_whole_corpus_is_read_to_the_bar(
    judged: dict[str, tuple[corpus.Fixture, list[corpus.Field]]],
) -> None:
    assert _share([fields for _, fields in judged.values()]) >= BAR


def test_the_table_has_a_row_per_release(
    judged: dict[str, tuple[corpus.Fixture, list[corpus.Field]]],
) -> None:
    table = corpus.table(judged)
    assert table.splitlines()[0] == "| release | logs | fields | right | share |"
    for fixture, _ in judged.values():
        assert f"| {corpus.family(fixture.release)} |" in table
    assert "| **all** |" in table.splitlines()[-1]
