"""The launcher's own metrics, for Prometheus: a textfile for node_exporter's textfile collector.

Written, never served (docs/decisions/0012): no port of the launcher's own to guard or keep up,
and the last figures survive the launcher itself — `vllm_gate_last_update_timestamp_seconds` tells
an alert that it stopped writing. One file per profile, `vllm_gate_<profile>.prom`, in
`$VLLM_GATE_METRICS_DIR` (else `STATE/metrics/`), rewritten atomically (prometheus_client's
`write_to_textfile`: a temp file, then a rename) at every transition and every minute.

Counters count the profile's history records, so they start where the history left off after a
restart: promotions, rollbacks (rejected candidates), engine starts, engine deaths, parks, wakes,
refused reloads, and each verdict the serving watch reached. Their `_created` is therefore the
moment of the profile's first history record, the same at every rewrite and after a restart: a
counter is created when its count begins, and these begin with the history, not with the process
that writes the file (a `_created` that moved at every rewrite read as a reset to anything that
honours it). A start's seconds come from the history too: the `start` record's stamp to its
`gates` record's, and vLLM's own time to ready where its log said it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from basis.clock import epoch_of

if TYPE_CHECKING:  # imported where a file is written: `launch status` and `check` only read state
    from prometheus_client import CollectorRegistry, Gauge
    from prometheus_client.core import CounterMetricFamily

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
    "parked": "parks",  # what served was put to sleep beside a change (park = "sleep")
    "park_skipped": "parks_skipped",  # … or could not sleep, and was stopped instead
    "wake_failed": "wakes_failed",  # a sleeper that could not serve again: last-good started cold
}
WATCHED = ("watch", "wedged", "failing", "starving")  # the records that carry the watch's verdict
START_PHASES = {  # phase -> what its seconds measure
    "total": "the engine spawned to the gates' verdict",  # the history's start and gates records
    "ready": "vLLM's own log, its first line to ready",  # absent where the log did not say
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
        self.verdicts: Counter[str] = Counter()  # each verdict the serving watch reached
        self.counted_since: float | None = None  # the first history record's moment: the counters' `_created`
        self.start_seconds: dict[str, float] = {}  # the last start that reached a verdict, by phase
        self.timeline_seconds: dict[str, float] = {}  # … by the phases of its timeline (vLLM's lines)
        self.spawned_at: float | None = None  # the stamp of the last `start` record
        self.status: dict[str, Any] = {}
        self.last_rejected: dict[str, str] | None = None
        for record in history:
            self.event(str(record.get("event")), record)
        self.written_at = 0.0
        self.error: str | None = None  # the last write's failure (a full disk never stops serving)

    def event(self, name: str, record: Mapping[str, Any]) -> None:
        """One history record as written (its `ts` included): counted, and what it says kept."""
        at = epoch_of(record.get("ts"))
        if self.counted_since is None:
            self.counted_since = at
        if name in COUNTED:
            self.counts[COUNTED[name]] += 1
        if name in WATCHED and record.get("verdict") in VERDICTS:
            self.verdicts[str(record["verdict"])] += 1
        if name == "start":
            self.spawned_at = at
        elif name == "gates":
            self.start_seconds = start_seconds(self.spawned_at, at, record.get("startup_seconds"))
            self.timeline_seconds = timeline_seconds(record.get("timeline"))
        elif name == "rejected":
            self.last_rejected = {
                "fingerprint": str(record.get("fingerprint") or ""),
                "reason": str(record.get("reason") or "")[:200],
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
        registry.register(_Families(self._counters))
        phases = "; ".join(f"{name}: {what}" for name, what in START_PHASES.items())
        started = _gauge(registry, "start_seconds", f"The last start's seconds by phase ({phases}).", "phase")
        for name, seconds in self.start_seconds.items():
            started.labels(p, name).set(seconds)
        if self.timeline_seconds:
            cut = _gauge(
                registry,
                "start_phase_seconds",
                "The last start's timeline: vLLM's phases from its own lines, and the launcher's time "
                "outside its log (they add up to the start; docs/logs.md).",
                "phase",
            )
            for name, seconds in self.timeline_seconds.items():
                cut.labels(p, name).set(seconds)
        if self.last_rejected is not None:
            rejected = _gauge(
                registry, "last_rejected_info", "The last candidate the gates rejected.", "fingerprint"
            )
            rejected.labels(p, self.last_rejected["fingerprint"]).set(1)
        stamp = _gauge(registry, "last_update_timestamp_seconds", "When the launcher last wrote this file.")
        stamp.labels(p).set(time.time())
        return registry

    def _counters(self) -> list[CounterMetricFamily]:
        """The counters as families with a `_created` that stays put (prometheus_client's `Counter`
        stamps the moment it was built, and the registry is built anew at every write)."""
        from prometheus_client.core import CounterMetricFamily

        families = []
        for name in sorted(set(COUNTED.values())):
            family = CounterMetricFamily(f"vllm_gate_{name}", f"History records: {name}.", labels=["profile"])
            family.add_metric([self.profile], self.counts[name], created=self.counted_since)
            families.append(family)
        verdicts = CounterMetricFamily(
            "vllm_gate_watch_verdicts",
            "Each verdict the serving watch reached, by verdict.",
            labels=["profile", "verdict"],
        )
        for verdict in VERDICTS:
            verdicts.add_metric([self.profile, verdict], self.verdicts[verdict], created=self.counted_since)
        return [*families, verdicts]


def start_seconds(spawned_at: float | None, judged_at: float | None, ready_s: object) -> dict[str, float]:
    """The seconds of one start by phase (START_PHASES): what its records say, nothing guessed."""
    seconds: dict[str, float] = {}
    if spawned_at is not None and judged_at is not None and judged_at >= spawned_at:
        seconds["total"] = round(judged_at - spawned_at, 3)
    if isinstance(ready_s, int | float) and not isinstance(ready_s, bool) and ready_s >= 0:
        seconds["ready"] = float(ready_s)
    return seconds


def timeline_seconds(timeline: object) -> dict[str, float]:
    """A `gates` record's timeline as phase -> seconds; nothing where the record holds none or a
    torn one (a hand-edited history is read, not trusted)."""
    phases = timeline.get("phases") if isinstance(timeline, dict) else None
    out: dict[str, float] = {}
    for phase in phases if isinstance(phases, list) else []:
        name = phase.get("name") if isinstance(phase, dict) else None
        seconds = phase.get("seconds") if isinstance(phase, dict) else None
        if isinstance(name, str) and name.isidentifier() and len(name) <= 40 and _seconds(seconds):
            out[name] = float(seconds)
    return out


def _seconds(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e7


@dataclass(frozen=True, slots=True)
class _Families:
    """A collector over families built when the registry is read (prometheus_client's protocol)."""

    build: Callable[[], list[CounterMetricFamily]]

    def collect(self) -> list[CounterMetricFamily]:
        return self.build()


def _gauge(registry: CollectorRegistry, name: str, text: str, *labels: str) -> Gauge:
    from prometheus_client import Gauge

    return Gauge(f"vllm_gate_{name}", text, ["profile", *labels], registry=registry)
