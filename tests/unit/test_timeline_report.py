"""A start's timeline in the history: its record, its table, and what changed between two starts.

Built from the real 0.26.0 logs: a cold start (tiny.log: the compile cache missed) against a warm one
(h200-2 promotion: the cache hit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.logfacts import parse_file
from launcher.logfacts.timeline_report import (
    OUTSIDE,
    compare,
    recorded_starts,
    render_line,
    render_starts,
    render_table,
    start_record,
)

REAL = Path(__file__).parents[1] / "data" / "real-vllm-0.26"


def _record(log: str, gate_seconds: float) -> dict[str, Any]:
    facts = parse_file(str(REAL / log), events=False)[0].to_json()
    record = start_record(facts, [{"name": "health", "duration_s": gate_seconds}])
    assert record is not None
    return record


def test_the_record_adds_what_the_launcher_measured_around_the_log() -> None:
    record = _record("tiny.log", 70.5)
    assert record["log_seconds"] == 64
    assert record["phases"][-1] == {
        "name": OUTSIDE,
        "label": "before vLLM's first line, and gates",
        "seconds": 6.5,
        "detail": {},
    }
    assert record["total_seconds"] == 70.5
    assert sum(p["seconds"] for p in record["phases"]) == 70.5


def test_no_record_without_a_ready_start() -> None:
    facts = parse_file(str(REAL / "free-memory.log"), events=False)[0].to_json()
    assert start_record(facts, [{"duration_s": 10.0}]) is None


def test_the_table_names_each_phase_and_its_figures() -> None:
    table = render_table(_record("tiny.log", 70.5))
    assert table.splitlines()[0] == "start timeline"
    assert (
        "  compile           10 s  torch.compile · cache miss (/root/.cache/vllm/torch_compile_cache/"
        in table
    )
    assert "102 graphs in 1.0 s" in table
    assert table.splitlines()[-1].startswith("  total             70 s")  # 70.5 shown as whole seconds


def test_a_cold_compile_after_a_warm_one_is_named() -> None:
    warm, cold = _record("h200-2/promotion/engine.log", 35.0), _record("tiny.log", 70.5)
    changes = compare(warm, cold)
    assert "torch.compile cache miss (was hit); cache dir now " in changes[0]
    assert "compile took 10 s, was 1 s" in changes
    assert compare(cold, cold) == []


def test_a_slower_disk_and_more_graphs_are_named() -> None:
    before = _record("tiny.log", 70.5)
    after = {**before, "phases": [dict(p) for p in before["phases"]]}
    for phase in after["phases"]:
        if phase["name"] == "graphs":
            phase["detail"] = {**phase["detail"], "count": 140}
    before["phases"][1]["detail"] = {"gib": 4.69, "load_seconds": 3.1, "gb_per_s": 1.62}
    after["phases"][1]["detail"] = {"gib": 4.69, "load_seconds": 31.0, "gb_per_s": 0.16}
    changes = compare(before, after)
    assert any(c.startswith("weights read at 0.16 GB/s, was 1.62 GB/s") for c in changes)
    assert any(c.startswith("140 CUDA graphs captured, was 102") for c in changes)


def test_starts_side_by_side_oldest_first() -> None:
    warm, cold = _record("h200-2/promotion/engine.log", 35.0), _record("tiny.log", 70.5)
    text = render_starts(
        [{"ts": "2026-12-01T07:30:00Z", "timeline": warm}, {"ts": "2026-12-02T09:31:00Z", "timeline": cold}]
    )
    lines = text.splitlines()
    assert lines[0].split() == ["phase", "2026-12-01T07:30:00", "2026-12-02T09:31:00"]
    compile_row = next(line for line in lines if line.startswith("compile "))
    assert compile_row.split() == ["compile", "1", "s", "(hit)", "10", "s", "(miss)"]
    assert any(line.startswith("2026-12-02T09:31:00: torch.compile cache miss (was hit)") for line in lines)


def test_the_weights_page_cache_share_is_kept_beside_the_phase_and_named_when_it_fell() -> None:
    facts = parse_file(str(REAL / "tiny.log"), events=False)[0].to_json()
    warm = start_record(facts, [{"duration_s": 70.5}], weights_cached=1.0)
    cold = start_record(facts, [{"duration_s": 70.5}], weights_cached=0.02)
    assert warm is not None and cold is not None
    weights = next(p for p in warm["phases"] if p["name"] == "weights")
    assert weights["detail"]["in_page_cache"] == 1.0
    assert "100% in the page cache at the start" in render_table(warm)
    assert start_record(facts, [], weights_cached=None) == start_record(facts, [])  # no figure, no key
    for record, share in ((warm, 1.0), (cold, 0.02)):
        phase = next(p for p in record["phases"] if p["name"] == "weights")
        phase["detail"] = {**phase["detail"], "gib": 4.69, "gb_per_s": 1.62 if share == 1.0 else 0.16}
    changes = compare(warm, cold)
    assert (
        "weights read at 0.16 GB/s, was 1.62 GB/s (2% of them in the page cache at the start, was 100%)"
        in (changes)
    )
    row = next(
        line
        for line in render_starts([{"ts": "a", "timeline": warm}, {"ts": "b", "timeline": cold}]).splitlines()
        if line.startswith("weights")
    )
    assert "(1.62 GB/s, 100% cached)" in row and "(0.16 GB/s, 2% cached)" in row


def test_one_line_for_the_journal_holds_every_phase_and_the_total() -> None:
    record = _record("tiny.log", 70.5)
    line = render_line(record)
    assert line.startswith("start timeline: startup 36 s · weights 1 s · compile 10 s (miss) · ")
    assert line.endswith(" · outside_log 6 s · total 70 s")  # 6.5 and 70.5 in whole seconds, as the table


def test_the_last_starts_with_a_readable_timeline_are_picked_oldest_first() -> None:
    timeline = _record("tiny.log", 70.5)
    junk = {"phases": [{"name": "weights", "seconds": "NaN"}]}  # hand-edited: never plotted nor summed
    records = [
        {"ts": f"2026-12-0{day}T07:00:00Z", "event": "gates", "label": f"svc@{day}", "passed": True, **extra}
        for day, extra in (
            (1, {"timeline": timeline}),
            (2, {}),  # no ready start: no timeline
            (3, {"timeline": junk}),
            (4, {"timeline": {"phases": [{"name": "x", "seconds": float("inf")}]}}),
            (5, {"timeline": timeline, "gates": [], "fingerprint": "ab"}),
            (6, {"timeline": timeline}),
        )
    ]
    picked = recorded_starts(records, 2)
    assert [s["ts"][:10] for s in picked] == ["2026-12-05", "2026-12-06"]
    assert picked[0] == {"ts": "2026-12-05T07:00:00Z", "event": "gates", "label": "svc@5", "passed": True,
                         "timeline": timeline}  # fmt: skip
    assert [s["label"] for s in recorded_starts(records, 10)] == ["svc@1", "svc@5", "svc@6"]
    assert recorded_starts(records, 0) == [] and recorded_starts([], 5) == []
