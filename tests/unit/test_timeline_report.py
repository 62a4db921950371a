"""A start's timeline in the history: its record, its table, and what changed between two starts.

Built from the real 0.26.0 logs: a cold start (tiny.log: the compile cache missed) against a warm one
(h200-2 promotion: the cache hit); a sleeper's wake cut by the stopwatch on a fake clock, beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher.logfacts import parse_file
from launcher.logfacts.timeline_report import (
    COLD,
    OUTSIDE,
    StartMarks,
    WAKE,
    WAKE_PHASES,
    Stopwatch,
    changes,
    compare,
    recorded_starts,
    render_line,
    render_starts,
    render_table,
    start_record,
)
from tests.doubles import FakeClock

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
    warm = start_record(facts, [{"duration_s": 70.5}], StartMarks(FakeClock().monotonic, weights_cached=1.0))
    cold = start_record(facts, [{"duration_s": 70.5}], StartMarks(FakeClock().monotonic, weights_cached=0.02))
    assert warm is not None and cold is not None
    weights = next(p for p in warm["phases"] if p["name"] == "weights")
    assert weights["detail"]["in_page_cache"] == 1.0
    assert "100% in the page cache at the start" in render_table(warm)
    assert start_record(facts, [], StartMarks(FakeClock().monotonic)) == start_record(facts, [])  # no figure
    for record, share in ((warm, 1.0), (cold, 0.02)):
        phase = next(p for p in record["phases"] if p["name"] == "weights")
        phase["detail"] = {**phase["detail"], "gib": 4.69, "gb_per_s": 1.62 if share == 1.0 else 0.16}
    found = compare(warm, cold)
    assert (
        "weights read at 0.16 GB/s, was 1.62 GB/s (2% of them in the page cache at the start, was 100%)"
        in (found)
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


def _wake(*seconds: float) -> dict[str, Any]:
    """A wake's timeline cut on a fake clock: each phase of WAKE_PHASES takes its seconds in turn."""
    clock = FakeClock()
    watch = Stopwatch(clock.monotonic, WAKE, WAKE_PHASES)
    for name, step in zip(WAKE_PHASES, seconds, strict=False):
        clock.sleep(step)
        watch.lap(name)
    timeline = watch.timeline()
    assert timeline is not None
    return timeline


def test_a_stopwatch_cuts_contiguous_phases_that_add_up_to_its_seconds() -> None:
    clock = FakeClock(now=1000.1)  # floats that do not add up exactly by themselves
    watch = Stopwatch(clock.monotonic, WAKE, WAKE_PHASES)
    assert watch.timeline() is None and watch.as_record() == {"seconds": 0.0}  # no phase ended yet
    for name, step in zip(WAKE_PHASES, (0.1, 0.2, 1.0 / 3, 0.7), strict=True):
        clock.sleep(step)
        watch.lap(name)
    record = watch.as_record()
    phases = record["timeline"]["phases"]
    assert [p["name"] for p in phases] == ["wait_memory", "wake_up", "checks", "gates"]
    assert [p["seconds"] for p in phases] == [0.1, 0.2, 0.333, 0.7]
    assert phases[1]["label"] == "POST /wake_up" and phases[0]["detail"] == {}
    assert record["seconds"] == record["timeline"]["total_seconds"] == 1.333
    assert round(sum(p["seconds"] for p in phases), 3) == record["seconds"]
    assert record["timeline"]["kind"] == WAKE


def test_a_wake_is_not_a_faster_disk_than_a_cold_start() -> None:
    cold, wake = _record("tiny.log", 70.5), _wake(0.2, 1.5, 0.3, 0.7)
    assert cold["kind"] == COLD
    assert compare(cold, wake) == ["woken from sleep (was a cold start)"]
    assert compare(wake, cold) == ["a cold start (was woken from sleep)"]
    assert compare(wake, _wake(0.2, 9.0, 0.3, 0.7)) == ["wake_up took 9.00 s, was 1.50 s"]  # like with like
    assert compare({k: v for k, v in cold.items() if k != "kind"}, cold) == []  # a record from before kinds


def test_a_cold_start_after_a_wake_is_compared_with_the_cold_start_before_it() -> None:
    warm, cold = _record("h200-2/promotion/engine.log", 35.0), _record("tiny.log", 70.5)
    found = changes([{"timeline": warm}, {"timeline": _wake(0.2, 1.5, 0.3, 0.7)}, {"timeline": cold}])
    assert found[0] == ["woken from sleep (was a cold start)"]
    assert found[1][0] == "a cold start (was woken from sleep)"
    assert any("torch.compile cache miss (was hit)" in change for change in found[1])  # against `warm`


def test_cold_starts_and_wakes_side_by_side() -> None:
    cold = _record("tiny.log", 70.5)
    text = render_starts(
        [
            {"ts": "2026-12-01T07:30:00Z", "event": "gates", "timeline": cold},
            {"ts": "2026-12-01T07:40:00Z", "event": "woken", "timeline": _wake(0.2, 1.5, 0.3, 0.7)},
            {"ts": "2026-12-01T07:50:00Z", "event": "wake_failed", "timeline": _wake(0.0, 10.0)},
        ]
    )
    lines = text.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:] if not line.startswith("2026")}
    assert rows["compile"] == ["10", "s", "(miss)", "-", "-"]
    assert rows["wake_up"] == ["-", "1.50", "s", "10.00", "s"]  # a wake's fractions of a second stay
    assert rows["gates"] == ["-", "0.70", "s", "-"]  # the failed wake got no further
    assert rows["total"] == ["70", "s", "2.70", "s", "10.00", "s"]
    assert rows["kind"] == ["cold", "wake", "wake", "(failed)"]
    assert [line for line in lines if line.startswith("2026-12-01T07:40")] == [
        "2026-12-01T07:40:00: woken from sleep (was a cold start)"  # no faster disk, no shorter phases
    ]
    assert "2026-12-01T07:50:00: wake_up took 10.00 s, was 1.50 s" in lines  # a wake against the last wake


def test_a_wake_s_line_names_it_and_keeps_its_hundredths() -> None:
    wake = {
        "kind": "wake",
        "phases": [{"name": "wake_up", "seconds": 0.25}, {"name": "gates", "seconds": 0.5}],
    }
    assert (
        render_line({**wake, "total_seconds": 0.75})
        == "wake timeline: wake_up 0.25 s · gates 0.50 s · total 0.75 s"
    )


def test_the_launcher_s_clock_frames_the_log_imports_before_it_gates_after_ready() -> None:
    """Spawned at 0, the ready line seen at 70.0 (the log's own span is 64 s), judged at 75.5: the
    6 s before vLLM's first line are its imports, the 5.5 s after ready its gates; all add up."""
    clock = FakeClock()
    marks = StartMarks(clock.monotonic)
    clock.sleep(70.0)
    marks.saw_ready()
    clock.sleep(3.0)
    marks.saw_ready()  # the first ready line counts
    clock.sleep(2.5)
    facts = parse_file(str(REAL / "tiny.log"), events=False)[0].to_json()
    record = start_record(facts, [{"duration_s": 99.0}], marks)  # the chain's own sum no longer used
    assert record is not None
    names = [p["name"] for p in record["phases"]]
    assert names[0] == "imports" and names[1] == "startup" and names[-2:] == ["api_server", "gates"]
    seconds = {p["name"]: p["seconds"] for p in record["phases"]}
    assert (seconds["imports"], seconds["gates"], record["log_seconds"]) == (6.0, 5.5, 64)
    assert record["total_seconds"] == sum(seconds.values()) == 75.5


def test_a_ready_line_the_launcher_never_saw_leaves_one_row_outside_the_log() -> None:
    facts = parse_file(str(REAL / "tiny.log"), events=False)[0].to_json()
    record = start_record(facts, [{"duration_s": 70.5}], StartMarks(FakeClock().monotonic))
    assert record is not None and record["phases"][-1]["name"] == OUTSIDE and record["total_seconds"] == 70.5
