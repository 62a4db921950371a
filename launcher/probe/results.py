"""What a probe did, as values: each arm's outcome and runs, the restore, and the settings it ran with."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from launcher.bench.options import BenchOptions
from launcher.probe.arms import Arm
from launcher.probe.measure import Measurement
from launcher.probe.production import Production
from launcher.probe.recovery import DEFAULT_RESTORE_TIMEOUT_S, Restored

DEFAULT_RUNS = 2  # field notes: "every arm runs twice" — one run once sent a good change back
DEFAULT_WARMUP_REQUESTS = 4
DEFAULT_RELEASE_TIMEOUT_S = 300.0
DEFAULT_STOP_TIMEOUT_S = 180.0  # the launcher's own TERM -> grace (30 s) -> KILL of its engine, and then some


class ArmOutcome(StrEnum):
    MEASURED = "measured"
    REJECTED = "rejected"  # a required gate failed: no numbers
    REFUSED = "refused"  # preflight refused, or the box was not released in time
    FAILED = "failed"  # an error while starting or measuring
    INTERRUPTED = "interrupted"  # SIGINT/SIGTERM to the probe
    NOT_RUN = "not run"  # the probe stopped before this arm


@dataclass(frozen=True, slots=True)
class Settings:
    bench: BenchOptions
    bench_name: str
    out_dir: Path
    runs: int = DEFAULT_RUNS
    warmup_requests: int = DEFAULT_WARMUP_REQUESTS
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S
    release_timeout_s: float = DEFAULT_RELEASE_TIMEOUT_S
    restore_timeout_s: float = DEFAULT_RESTORE_TIMEOUT_S
    allow_unknown: bool = False

    def describe_bench(self) -> str:
        b = self.bench
        contexts = ",".join(c.name for c in b.contexts)
        concurrency = ",".join(str(c) for c in b.concurrency)
        return (
            f"{self.bench_name}: contexts {contexts}, concurrency {concurrency}, {b.rounds} rounds of "
            f"{b.prompts} prompts, max_tokens {b.max_tokens}"
        )


@dataclass(frozen=True, slots=True)
class ArmRun:
    arm: Arm
    outcome: ArmOutcome
    detail: str | None = None
    measurement: Measurement | None = None
    gates: tuple[dict[str, Any], ...] = ()
    seconds: float = 0.0
    release: str | None = None  # how the box was freed before this arm started
    fingerprint: str | None = None

    @property
    def summaries(self) -> tuple[dict[str, Any], ...]:
        return self.measurement.summaries if self.measurement else ()


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe_id: str
    profile: str
    production: Production
    settings: Settings
    runs: tuple[ArmRun, ...]
    restored: Restored | None
    started_at: str
    finished_at: str
    downtime_s: float | None = None
    stop_how: str | None = None
    interrupted_by: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def production_back(self) -> bool:
        return self.restored is not None and self.restored.ok
