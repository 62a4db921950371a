"""`launch probe --dry-run`: the arms, what each changes in argv/env, and the downtime to expect.

The expected downtime comes from this host's own history: the start → promoted durations of the
profile's last starts (the gates included), one per arm that is started plus one for restoring
production. The bench time of each arm comes on top and is not guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

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
        lines += [f"       warning: {w}" for w in arm.plan.warnings if w not in arms[0].plan.warnings]
    lines.append(
        f"each arm: gates, {settings.warmup_requests} warm-up requests, then {settings.runs} bench run(s) "
        f"({settings.describe_bench()})"
    )
    lines.append(f"results: {settings.out_dir}/report.md, probe.json, probe.png")
    lines.append("")
    lines.append(expected_downtime(len(arms) - 1, production, times))
    return "\n".join(lines)


def expected_downtime(changed_arms: int, production: Production, times: StartTimes) -> str:
    if not production.running:
        return "downtime: none expected — no launcher serves this profile now, and none is started after"
    starts = changed_arms + 1
    typical = times.typical_s
    if typical is None:
        return (
            f"expected downtime: {starts} starts (the arms, then production again) + each arm's bench; "
            "no start → promoted duration in the history to estimate a start from"
        )
    total = starts * typical
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
