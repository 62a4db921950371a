"""The parser against real-world-shaped log excerpts: `launch parse-log --json` on each must show the
facts its `NAME.expected.json` lists (a subset: only the keys that fixture is about)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import launch
from launcher.logfacts import LogFacts, parse_file

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
CASES = sorted(p.name[: -len(".log")] for p in LOGS.glob("*.log"))


def test_corpus_is_there() -> None:
    assert len(CASES) >= 20
    for name in CASES:
        assert (LOGS / f"{name}.expected.json").is_file(), name


@pytest.mark.parametrize("name", CASES)
def test_parse_log_json_matches_expected(name: str) -> None:
    expected = json.loads((LOGS / f"{name}.expected.json").read_text())
    result = CliRunner().invoke(launch, ["parse-log", str(LOGS / f"{name}.log"), "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert set(expected) <= set(got), f"unknown keys in expectation: {set(expected) - set(got)}"
    mismatches = {key: (want, got[key]) for key, want in expected.items() if got[key] != want}
    assert not mismatches, json.dumps(mismatches, indent=1, ensure_ascii=False)[:4000]


def test_every_json_key_is_present_and_null_when_unknown() -> None:
    facts, _ = parse_file(LOGS / "fail_tool_parser_requires.log")
    payload = facts.to_json()
    assert list(payload) == [f.name for f in fields(LogFacts)]
    assert payload["vllm_version"] is None and payload["model"] is None and payload["kv_cache_tokens"] is None
    assert payload["tensor_parallel_size"] is None  # never a default
    json.dumps(payload)


@pytest.mark.parametrize("name", CASES)
def test_prefilter_misses_nothing(name: str) -> None:
    """A marker the scanner cannot prefilter (a lookaround) makes it read every line: same facts."""
    fast_facts, fast_events = parse_file(LOGS / f"{name}.log")
    slow_facts, slow_events = parse_file(LOGS / f"{name}.log", markers=[r"(?<=x)never-printed"])
    assert [e for e in slow_events if e.kind != "marker_seen"] == fast_events
    assert slow_facts.to_json() | {"markers": []} == fast_facts.to_json()
