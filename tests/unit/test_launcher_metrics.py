"""The launcher's Prometheus textfile: names, labels and values from the history and the status,
read back with prometheus_client's own parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from launcher.state.metrics import LauncherMetrics, metrics_dir

HISTORY = [
    {"event": "start", "profile": "svc"}, {"event": "gates"}, {"event": "promoted"},
    {"event": "start"}, {"event": "rejected", "fingerprint": "bad1", "reason": "rejected by tool_call: x"},
    {"event": "start"}, {"event": "wedged"}, {"event": "engine_died"},
]  # fmt: skip


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found[(name, tuple(sorted({"profile": "svc", **labels}.items())))]


def test_counters_go_on_from_the_history_and_the_status_sets_the_gauges(tmp_path: Path) -> None:
    metrics = LauncherMetrics(tmp_path, "svc", HISTORY)
    metrics.event("promoted", {"fingerprint": "good2"})
    metrics.update({"phase": "serving_last_good", "watch": {"verdict": "degraded"},
                    "gates": [{"name": "health", "verdict": "pass"}, {"name": "tool_call", "verdict": "fail"},
                              {"name": "smoke", "verdict": "skip"}]})  # fmt: skip
    found = samples(tmp_path / "vllm_gate_svc.prom")
    assert value(found, "vllm_gate_promotions_total") == 2
    assert value(found, "vllm_gate_rollbacks_total") == 1
    assert value(found, "vllm_gate_engine_starts_total") == 3
    assert value(found, "vllm_gate_engine_deaths_total") == 1 and value(found, "vllm_gate_watch_wedged_total") == 1
    assert value(found, "vllm_gate_phase", phase="serving_last_good") == 1
    assert value(found, "vllm_gate_phase", phase="serving") == 0
    assert value(found, "vllm_gate_watch_verdict", verdict="degraded") == 1
    assert value(found, "vllm_gate_serving") == 1  # degraded still answers
    assert value(found, "vllm_gate_gate_passed", gate="health") == 1
    assert value(found, "vllm_gate_gate_passed", gate="tool_call") == 0
    assert ("vllm_gate_gate_passed", (("gate", "smoke"), ("profile", "svc"))) not in found  # skipped: no verdict
    assert value(found, "vllm_gate_last_rejected_info", fingerprint="bad1") == 1
    assert value(found, "vllm_gate_last_update_timestamp_seconds") > 0


def test_a_wedged_server_is_not_serving() -> None:
    metrics = LauncherMetrics(Path("/nonexistent"), "svc")
    metrics.status = {"phase": "serving", "watch": {"verdict": "wedged"}}
    text = "".join(f"{s.name} {s.labels} {s.value}\n" for f in metrics.registry().collect() for s in f.samples)
    assert "vllm_gate_serving {'profile': 'svc'} 0.0" in text


def test_a_write_that_fails_is_reported_and_changes_nothing_else(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the directory should be")
    metrics = LauncherMetrics(blocker / "metrics", "svc")
    metrics.update({"phase": "serving"})
    assert metrics.error is not None and "not-a-dir" in metrics.error


def test_the_directory_node_exporter_reads(tmp_path: Path) -> None:
    assert metrics_dir(tmp_path, {}) == tmp_path / "metrics"
    assert metrics_dir(tmp_path, {"VLLM_GATE_METRICS_DIR": "/var/lib/node_exporter/textfile"}) == Path(
        "/var/lib/node_exporter/textfile"
    )


def test_refused_reloads_are_counted_from_the_history_on(tmp_path: Path) -> None:
    """A bad hand edit, preflight or the guard refusing a reload moved no metric (issue 42)."""
    metrics = LauncherMetrics(tmp_path, "svc", [*HISTORY, {"event": "reload_refused", "reason": "x"}])
    metrics.event("reload_refused", {"reason": "reload refused: profile 'svc' has 1 error(s); still serving"})
    metrics.update({"phase": "serving"})
    found = samples(tmp_path / "vllm_gate_svc.prom")
    assert value(found, "vllm_gate_reloads_refused_total") == 2
    assert value(found, "vllm_gate_phase", phase="serving") == 1  # what served serves on


STAMPED: list[dict[str, Any]] = [
    {"ts": "2025-03-01T10:00:00.250000Z", "event": "start", "profile": "svc"},
    {"ts": "2025-03-01T10:00:47.850000Z", "event": "gates", "passed": True, "startup_seconds": 41.2},
    {"ts": "2025-03-01T10:00:48.000000Z", "event": "promoted"},
    {"ts": "2025-03-01T11:00:00.000000Z", "event": "watch", "verdict": "degraded"},
    {"ts": "2025-03-01T11:00:30.000000Z", "event": "watch", "verdict": "serving"},
    {"ts": "2025-03-01T11:05:00.000000Z", "event": "watch", "verdict": "degraded"},
    {"ts": "2025-03-01T11:06:00.000000Z", "event": "wedged", "verdict": "wedged", "action": "restart"},
    {"ts": "2025-03-01T12:00:00.000000Z", "event": "parked", "seconds": 3.1},
    {"ts": "2025-03-01T12:01:00.000000Z", "event": "woken", "seconds": 9.0},
    {"ts": "2025-03-01T12:02:00.000000Z", "event": "park_skipped", "reason": "sleep failed: x"},
    {"ts": "2025-03-01T12:03:00.000000Z", "event": "parked", "seconds": 2.9},
    {"ts": "2025-03-01T12:04:00.000000Z", "event": "wake_failed", "reason": "x"},
    {"ts": "2025-03-01T12:05:00.000000Z", "event": "watch", "verdict": "no-such-verdict"},
]
FIRST_RECORD_AT = 1740823200.25  # 2025-03-01T10:00:00.25Z, the first record's moment


def created(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> set[float]:
    return {v for (name, _), v in found.items() if name.endswith("_created")}


def test_created_is_the_first_history_record_at_every_rewrite_and_after_a_restart(tmp_path: Path) -> None:
    """Was: prometheus_client's Counter stamped `_created` when the registry was built, i.e. at every
    rewrite, so each rewrite read as a reset of every counter (issue 44)."""
    metrics = LauncherMetrics(tmp_path, "svc", STAMPED)
    metrics.update({"phase": "serving"})
    first = samples(tmp_path / "vllm_gate_svc.prom")
    metrics.event("promoted", {"ts": "2025-03-02T00:00:00.000000Z", "event": "promoted"})
    metrics.update({"phase": "serving"})
    second = samples(tmp_path / "vllm_gate_svc.prom")
    assert created(first) == created(second) == {FIRST_RECORD_AT}
    assert value(second, "vllm_gate_promotions_total") == value(first, "vllm_gate_promotions_total") + 1
    restarted = LauncherMetrics(tmp_path / "next", "svc", [*STAMPED, {"ts": "x", "event": "start"}])
    restarted.update({"phase": "starting"})
    assert created(samples(tmp_path / "next" / "vllm_gate_svc.prom")) == {FIRST_RECORD_AT}
    every_counter = {name for (name, _) in first if name.endswith("_total")}
    assert {name.removesuffix("_total") + "_created" for name in every_counter} == {
        name for (name, _) in first if name.endswith("_created")
    }


def test_a_profile_without_history_has_no_created_until_its_first_record(tmp_path: Path) -> None:
    metrics = LauncherMetrics(tmp_path, "svc")
    metrics.update({"phase": "starting"})
    assert created(samples(tmp_path / "vllm_gate_svc.prom")) == set()
    metrics.event("start", {"ts": "2025-03-01T10:00:00.250000Z", "event": "start"})
    metrics.update({"phase": "starting"})
    assert created(samples(tmp_path / "vllm_gate_svc.prom")) == {FIRST_RECORD_AT}


def test_parks_wakes_and_each_watch_verdict_are_counted(tmp_path: Path) -> None:
    metrics = LauncherMetrics(tmp_path, "svc", STAMPED)
    metrics.update({"phase": "serving"})
    found = samples(tmp_path / "vllm_gate_svc.prom")
    assert value(found, "vllm_gate_parks_total") == 2
    assert value(found, "vllm_gate_parks_skipped_total") == 1
    assert value(found, "vllm_gate_wakes_total") == 1 and value(found, "vllm_gate_wakes_failed_total") == 1
    by_verdict = {v: value(found, "vllm_gate_watch_verdicts_total", verdict=v) for v in
                  ("serving", "degraded", "wedged", "failing", "starving")}  # fmt: skip
    assert by_verdict == {"serving": 1, "degraded": 2, "wedged": 1, "failing": 0, "starving": 0}
    assert value(found, "vllm_gate_watch_wedged_total") == 1  # the older name counts on
    unknown = [labels for (name, labels) in found if name == "vllm_gate_watch_verdicts_total"]
    assert ("verdict", "no-such-verdict") not in {pair for labels in unknown for pair in labels}


def test_the_last_start_s_seconds_by_phase_come_from_its_records(tmp_path: Path) -> None:
    metrics = LauncherMetrics(tmp_path, "svc", STAMPED)
    metrics.update({"phase": "serving"})
    found = samples(tmp_path / "vllm_gate_svc.prom")
    assert value(found, "vllm_gate_start_seconds", phase="total") == 47.6  # 10:00:00.25 to 10:00:47.85
    assert value(found, "vllm_gate_start_seconds", phase="ready") == 41.2  # vLLM's own log said so
    # the next start: no verdict yet, the last one's figures stand; then one whose log gave no ready line
    metrics.event("start", {"ts": "2025-03-02T00:00:00.000000Z"})
    metrics.update({"phase": "gating"})
    assert value(samples(tmp_path / "vllm_gate_svc.prom"), "vllm_gate_start_seconds", phase="total") == 47.6
    metrics.event("gates", {"ts": "2025-03-02T00:02:00.000000Z", "passed": False, "startup_seconds": None})
    metrics.update({"phase": "rolling_back"})
    found = samples(tmp_path / "vllm_gate_svc.prom")
    assert value(found, "vllm_gate_start_seconds", phase="total") == 120.0
    assert ("vllm_gate_start_seconds", (("phase", "ready"), ("profile", "svc"))) not in found


def test_no_start_seconds_where_the_records_do_not_say(tmp_path: Path) -> None:
    metrics = LauncherMetrics(tmp_path, "svc", [{"ts": "torn", "event": "start"}, {"event": "gates"}])
    metrics.update({"phase": "serving"})
    assert not any(name == "vllm_gate_start_seconds" for (name, _) in samples(tmp_path / "vllm_gate_svc.prom"))


def test_the_last_start_s_timeline_is_one_gauge_a_phase_and_a_torn_one_writes_nothing(tmp_path: Path) -> None:
    timeline = {
        "phases": [
            {"name": "startup", "seconds": 36},
            {"name": "weights", "seconds": 1.0},
            {"name": "outside_log", "seconds": 6.5},
            {"name": "bad label\n", "seconds": 1.0},  # a hand-edited history is read, not trusted
            {"name": "graphs", "seconds": "many"},
        ]
    }
    metrics = LauncherMetrics(tmp_path, "svc", [{"ts": "2025-03-01T10:00:00.000000Z", "event": "start"}])
    metrics.event("gates", {"ts": "2025-03-01T10:00:43.500000Z", "passed": True, "timeline": timeline})
    metrics.update({"phase": "serving"})
    found = samples(tmp_path / "vllm_gate_svc.prom")
    cut = {dict(labels)["phase"]: v for (name, labels), v in found.items() if name == "vllm_gate_start_phase_seconds"}
    assert cut == {"startup": 36.0, "weights": 1.0, "outside_log": 6.5}
    assert sum(cut.values()) == value(found, "vllm_gate_start_seconds", phase="total")  # they add up
    metrics.event("gates", {"ts": "2025-03-01T10:05:00.000000Z", "passed": False, "timeline": "torn"})
    metrics.update({"phase": "rolling_back"})
    assert not any(n == "vllm_gate_start_phase_seconds" for (n, _) in samples(tmp_path / "vllm_gate_svc.prom"))
