"""The launcher's own metrics, for Prometheus: a textfile for node_exporter's textfile collector.

Written, never served (docs/decisions/0012): no port of the launcher's own to guard or keep up,
and the last figures survive the launcher itself — `vllm_gate_last_update_timestamp_seconds` tells
an alert that it stopped writing. One file per profile, `vllm_gate_<profile>.prom`, in
`$VLLM_GATE_METRICS_DIR` (else `STATE/metrics/`), rewritten atomically (prometheus_client's
`write_to_textfile`: a temp file, then a rename) at every transition and every minute.

Counters count the profile's history records, so they start where the history left off after a
restart: promotions, rollbacks (rejected candidates), engine starts, engine deaths, the serving
watch's final verdicts.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a file is written: `launch status` and `check` only read state
    from prometheus_client import CollectorRegistry, Gauge

PHASES = ("starting", "gating", "serving", "rolling_back", "serving_last_good", "failed", "stopped", "parked")
VERDICTS = ("serving", "degraded", "wedged", "failing", "starving")
COUNTED = {  # history event -> counter
    "promoted": "promotions",
    "rejected": "rollbacks",
    "start": "engine_starts",
    "engine_died": "engine_deaths",
    "wedged": "watch_wedged",
    "failing": "watch_failing",
    "starving": "watch_starving",
    "woken": "wakes",
    "beside": "beside_trials",  # changes tried beside production (trial = "beside")
    "beside_skipped": "beside_skipped",  # … that fell back to park or stop: GPU memory, power, ports
    "reload_refused": "reloads_refused",  # a bad edit, preflight or the guard: what served kept serving
}
ENV = "VLLM_GATE_METRICS_DIR"
REFRESH_S = 60.0


def metrics_dir(state_dir: Path, environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    given = environ.get(ENV, "").strip()
    return Path(given) if given else state_dir / "metrics"


class LauncherMetrics:
    """What `Transitions.record` feeds: each history event and each status, then one file."""

    def __init__(self, directory: Path, profile: str, history: Iterable[Mapping[str, Any]] = ()) -> None:
        self.path = directory / f"vllm_gate_{profile}.prom"
        self.profile = profile
        self.counts: Counter[str] = Counter()
        self.status: dict[str, Any] = {}
        self.last_rejected: dict[str, str] | None = None
        for record in history:
            self.event(str(record.get("event")), record)
        self.written_at = 0.0
        self.error: str | None = None  # the last write's failure (a full disk never stops serving)

    def event(self, name: str, fields: Mapping[str, Any]) -> None:
        if name in COUNTED:
            self.counts[COUNTED[name]] += 1
        if name == "rejected":
            self.last_rejected = {
                "fingerprint": str(fields.get("fingerprint") or ""),
                "reason": str(fields.get("reason") or "")[:200],
            }

    def update(self, status: Mapping[str, Any]) -> None:
        self.status = dict(status)
        self.write()

    def maybe_refresh(self) -> None:
        if time.monotonic() - self.written_at >= REFRESH_S:
            self.write()

    def write(self) -> None:
        from prometheus_client import write_to_textfile

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_to_textfile(str(self.path), self.registry())
            self.error = None
        except OSError as err:
            self.error = f"{self.path}: {err.strerror or err}"
        self.written_at = time.monotonic()

    def registry(self) -> CollectorRegistry:
        from prometheus_client import CollectorRegistry
        from prometheus_client import Counter as PromCounter

        registry = CollectorRegistry()
        p, status = self.profile, self.status
        watch = status.get("watch") if isinstance(status.get("watch"), dict) else {}
        verdict = watch.get("verdict") if watch else None
        phase = _gauge(registry, "phase", "The launcher's phase (1 for the current one).", "phase")
        for name in PHASES:
            phase.labels(p, name).set(1 if status.get("phase") == name else 0)
        judged = _gauge(
            registry, "watch_verdict", "The serving watch's verdict (1 for the current one).", "verdict"
        )
        for name in VERDICTS:
            judged.labels(p, name).set(1 if verdict == name else 0)
        up = status.get("phase") in ("serving", "serving_last_good") and verdict not in ("wedged", "failing")
        _gauge(registry, "serving", "1 while requests are answered (not wedged or failing).").labels(p).set(
            int(up)
        )
        gates = _gauge(
            registry, "gate_passed", "The last chain's verdict per gate: 1 pass, 0 fail or error.", "gate"
        )
        for gate in status.get("gates") or []:
            if isinstance(gate, dict) and gate.get("verdict") in ("pass", "fail", "error"):
                gates.labels(p, str(gate.get("name"))).set(1 if gate["verdict"] == "pass" else 0)
        for name in sorted(set(COUNTED.values())):
            counter = PromCounter(
                f"vllm_gate_{name}", f"History records: {name}.", ["profile"], registry=registry
            )
            counter.labels(p).inc(self.counts[name])
        if self.last_rejected is not None:
            rejected = _gauge(
                registry, "last_rejected_info", "The last candidate the gates rejected.", "fingerprint"
            )
            rejected.labels(p, self.last_rejected["fingerprint"]).set(1)
        stamp = _gauge(registry, "last_update_timestamp_seconds", "When the launcher last wrote this file.")
        stamp.labels(p).set(time.time())
        return registry


def _gauge(registry: CollectorRegistry, name: str, text: str, *labels: str) -> Gauge:
    from prometheus_client import Gauge

    return Gauge(f"vllm_gate_{name}", text, ["profile", *labels], registry=registry)
