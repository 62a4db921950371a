"""`launch probe --dry-run`: the arms, what each changes in argv/env, and the downtime to expect.

The expected downtime comes from this host's own history: the start → promoted durations of the
profile's last starts (the gates included), one per arm that is started plus one for restoring
production. The bench time of each arm comes on top and is not guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from launcher.bench.stats import median
from launcher.probe.arms import Arm
from launcher.probe.production import Production
from launcher.probe.results import Settings
from launcher.supervisor.history import Event, History

RECENT_STARTS = 5


@dataclass(frozen=True, slots=True)
class StartTimes:
    seconds: tuple[float, ...]  # the last start → promoted durations, oldest first

    @property
    def typical_s(self) -> float | None:
        return median(self.seconds)


def start_times(history: History, profile: str, limit: int = RECENT_STARTS) -> StartTimes:
    """start → promoted pairs of `profile` in the history (a start not promoted is not counted)."""
    durations: list[float] = []
    started: datetime | None = None
    for record in history.read(profile):
        event = record.get("event")
        if event == Event.START:
            started = _when(record)
        elif event == Event.PROMOTED and started is not None:
            ended = _when(record)
            if ended is not None:
                durations.append((ended - started).total_seconds())
            started = None
        elif event in (Event.REJECTED, Event.ENGINE_STOPPED):
            started = None
    return StartTimes(tuple(durations[-limit:]))


def render_preview(arms: Sequence[Arm], production: Production, settings: Settings, times: StartTimes) -> str:
    profile = arms[0].name
    lines = [f"launch probe --dry-run: profile {profile!r}; nothing was started, stopped or written", ""]
    lines.append(f"production now: {production.describe()}")
    lines.append("arms:")
    for arm in arms:
        if arm.is_production:
            how = "measured as it serves (not restarted)" if production.running else "started like the others"
            lines.append(f"  0  {arm.name}  production {profile}@{arm.plan.fingerprint()}: {how}")
            continue
        lines.append(
            f"  {arm.index}  {arm.name}  {arm.describe_keys()}  ({profile}@{arm.plan.fingerprint()})"
        )
        lines += [f"       {line}" for change in arm.changes for line in change.lines()]
        lines += [f"       warning: {w}" for w in _new_warnings(arm, arms[0])]
    lines.append(
        f"each arm: gates, {settings.warmup_requests} warm-up requests, then {settings.runs} bench run(s) "
        f"({settings.describe_bench()})"
    )
    lines.append(f"results: {settings.out_dir}/report.md, probe.json, probe.png")
    lines.append("")
    lines.append(expected_downtime(len(arms) - 1, production, times))
    return "\n".join(lines)


def preview_json(
    arms: Sequence[Arm], production: Production, settings: Settings, times: StartTimes
) -> dict[str, Any]:
    """The plan as data (`launch probe --dry-run --json`): the facts `render_preview` shows, under
    probe.json's names (production, settings, arms)."""
    return {
        "profile": arms[0].name,
        "production": {k: v for k, v in production.to_json().items() if k != "env"},
        "arms": [_arm_json(arm, arms[0], production) for arm in arms],
        "settings": {
            "runs": settings.runs,
            "warmup_requests": settings.warmup_requests,
            "bench": settings.describe_bench(),
        },
        "out_dir": str(settings.out_dir),
        "downtime": downtime(len(arms) - 1, production, times),
    }


def _arm_json(arm: Arm, production_arm: Arm, production: Production) -> dict[str, Any]:
    return {
        "index": arm.index,
        "name": arm.name,
        "keys": list(arm.assignments),
        "fingerprint": arm.plan.fingerprint(),
        "started": not (arm.is_production and production.running),  # arm 0 is measured as it serves
        "changes": [change.to_json() for change in arm.changes],
        "warnings": [] if arm.is_production else _new_warnings(arm, production_arm),
    }


def _new_warnings(arm: Arm, production_arm: Arm) -> list[str]:
    return [w for w in arm.plan.warnings if w not in production_arm.plan.warnings]


def downtime(changed_arms: int, production: Production, times: StartTimes) -> dict[str, Any]:
    """What the probe costs production: one start per changed arm plus production's own, each as
    long as the median start → promoted of its last starts here (None without one)."""
    typical = times.typical_s if production.running else None
    starts = changed_arms + 1 if production.running else 0
    return {
        "expected": production.running,
        "starts": starts,
        "typical_start_s": typical,
        "recent_starts_s": list(times.seconds),
        "estimate_s": None if typical is None else starts * typical,
    }


def expected_downtime(changed_arms: int, production: Production, times: StartTimes) -> str:
    cost = downtime(changed_arms, production, times)
    if not cost["expected"]:
        return "downtime: none expected — no launcher serves this profile now, and none is started after"
    starts, typical, total = cost["starts"], cost["typical_start_s"], cost["estimate_s"]
    if typical is None:
        return (
            f"expected downtime: {starts} starts (the arms, then production again) + each arm's bench; "
            "no start → promoted duration in the history to estimate a start from"
        )
    return (
        f"expected downtime: {starts} starts × {typical:.0f} s (median start → promoted of the last "
        f"{len(times.seconds)} starts in the history) = about {_human(total)}, plus each arm's warm-up and "
        "bench; production is stopped once and restored once"
    )


def _when(record: dict[str, object]) -> datetime | None:
    try:
        return datetime.strptime(str(record.get("ts")), "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return None


def _human(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
