"""The launcher's Prometheus textfile: names, labels and values from the history and the status,
read back with prometheus_client's own parser."""

from __future__ import annotations

from pathlib import Path

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
