"""A start's timeline as the history keeps it, as a table, and the last starts side by side.

The history record holds the log's phases (timeline.py) and what the launcher saw around them on
its own clock (`StartMarks`): the spawn, the log's ready line and the verdict, so the time before
vLLM's first line (`imports`: Python imports) and the gates after ready (`gates`) are phases of
their own; an older record, or a start whose ready line went unseen, keeps one `outside_log` for
both (the gate chain's seconds less the log's span). A sleeper woken instead of a
cold start (`park = "sleep"`) keeps a timeline of the same shape, `kind` "wake", whose phases the
supervisor's clock cut (`Stopwatch`, WAKE_PHASES). `compare` names what changed between two starts of
one kind in the operator's words: a compile cache miss, a slower disk, more graphs; a wake is not a
faster disk than a cold start, only a wake.
`recorded_starts` picks those starts out of the history, for `launch history --starts` and the
bench's start-time chart alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

OUTSIDE = "outside_log"
OUTSIDE_LABEL = "before vLLM's first line, and gates"
IMPORTS, IMPORTS_LABEL = "imports", "the process started to vLLM's first line (Python imports)"
GATES, GATES_LABEL = "gates", "ready to the gates' verdict"
SLOWER = 1.5  # a phase this many times longer than before, and by at least MIN_GROWTH_S, is named
MIN_GROWTH_S = 5.0
START_FIELDS = ("ts", "event", "label", "passed", "timeline")  # what a start shows of its record
COLD, WAKE = "cold", "wake"
KIND_TEXT = {COLD: "a cold start", WAKE: "woken from sleep"}
WAKE_PHASES = {  # in the order a wake runs them (supervisor/park.py `wake_and_regate`)
    "wait_memory": "the GPU memory of the engine stopped before it, released",
    "wake_up": "POST /wake_up",
    "checks": "/is_sleeping, /reset_prefix_cache, the greedy answer",
    "gates": "the gates that speak HTTP, again",
}


class Stopwatch:
    """Contiguous phases on one clock (the supervisor's: a fake one in tests): each runs from the
    previous lap to its own. Kept in whole milliseconds, so that the phases add up to the total
    exactly (to the millisecond) however the floats round."""

    def __init__(self, monotonic: Callable[[], float], kind: str, labels: Mapping[str, str]) -> None:
        self._now = monotonic
        self.kind = kind
        self._labels = labels
        self._started = monotonic()
        self._laps: list[tuple[str, int]] = []  # a phase, and the milliseconds from the start to its end

    def lap(self, name: str) -> None:
        self._laps.append((name, round((self._now() - self._started) * 1000)))

    @property
    def seconds(self) -> float:
        """From the start to the last lap (0 before any)."""
        return self._laps[-1][1] / 1000 if self._laps else 0.0

    def as_record(self) -> dict[str, Any]:
        """The history record's `seconds`, and its `timeline` once a phase ended."""
        timeline = self.timeline()
        return {"seconds": self.seconds} | ({"timeline": timeline} if timeline is not None else {})

    def timeline(self) -> dict[str, Any] | None:
        """The `timeline` field of the history record; None when no phase ended."""
        if not self._laps:
            return None
        ends = [0] + [ms for _, ms in self._laps]
        phases = [
            {"name": name, "label": self._labels.get(name, ""), "seconds": (ms - before) / 1000, "detail": {}}
            for (name, ms), before in zip(self._laps, ends, strict=False)
        ]
        return {"kind": self.kind, "phases": phases, "total_seconds": self.seconds}


@dataclass(slots=True)
class StartMarks:
    """What the launcher saw of one cold start on its own clock, around vLLM's log: when it spawned
    the engine, when the log's ready line arrived; and the share of the weight files in the page
    cache as it spawned (`weights_cached`, read ahead or left by an earlier start)."""

    now: Callable[[], float]
    weights_cached: float | None = None
    spawned: float = field(init=False)
    ready: float | None = None

    def __post_init__(self) -> None:
        self.spawned = self.now()

    def saw_ready(self) -> None:
        if self.ready is None:
            self.ready = self.now()


def start_record(
    facts: Mapping[str, Any], gates: Sequence[Mapping[str, Any]], marks: StartMarks | None = None
) -> dict[str, Any] | None:
    """The `timeline` field of a start's history record, judged now; None when the log showed no
    ready start. With `marks`, the log's phases are framed by the launcher's own: `imports` before
    vLLM's first line and `gates` after ready; the weights phase keeps what its GB/s was measured
    against (`in_page_cache`)."""
    phases = [dict(p) for p in facts.get("timeline") or []]
    if not phases:
        return None
    for phase in phases:
        if phase["name"] == "weights" and marks is not None and marks.weights_cached is not None:
            phase["detail"] = {**phase.get("detail", {}), "in_page_cache": marks.weights_cached}
    log_s = sum(float(p["seconds"]) for p in phases)
    record: dict[str, Any] = {"kind": COLD, "phases": phases, "log_seconds": log_s}
    gated = sum(float(g.get("duration_s") or 0.0) for g in gates)
    if marks is not None and marks.ready is not None:
        # vLLM's stamps are whole seconds: `imports` is as exact as that, the gates to the millisecond
        before = round(max(0.0, marks.ready - marks.spawned - log_s), 3)
        after = round(max(0.0, marks.now() - marks.ready), 3)
        phases.insert(0, {"name": IMPORTS, "label": IMPORTS_LABEL, "seconds": before, "detail": {}})
        phases.append({"name": GATES, "label": GATES_LABEL, "seconds": after, "detail": {}})
        record["total_seconds"] = round(log_s + before + after, 3)
    elif gated > 0:
        outside = round(max(0.0, gated - log_s), 3)
        phases.append({"name": OUTSIDE, "label": OUTSIDE_LABEL, "seconds": outside, "detail": {}})
        record["total_seconds"] = round(log_s + outside, 3)
    return record


def recorded_starts(records: Iterable[Mapping[str, Any]], last: int) -> list[dict[str, Any]]:
    """The last `last` records that kept a readable timeline, oldest first, as START_FIELDS; a
    hand-edited or foreign timeline (a phase without a name or finite seconds) is left out."""
    timed = [r for r in records if _readable(r.get("timeline"))]
    return [{k: r.get(k) for k in START_FIELDS} for r in timed[-last:]] if last > 0 else []


def _readable(timeline: object) -> bool:
    if not isinstance(timeline, dict) or not isinstance(timeline.get("phases"), list):
        return False
    return all(
        isinstance(p, dict)
        and isinstance(p.get("name"), str)
        and isinstance(p.get("seconds"), int | float)
        and math.isfinite(p["seconds"])
        and p["seconds"] >= 0
        for p in timeline["phases"]
    )


def render_table(timeline: Mapping[str, Any]) -> str:
    """One row a phase: its name, seconds, and the figures its lines state."""
    rows = [(p["name"], f"{float(p['seconds']):6.0f} s", _detail(p)) for p in timeline.get("phases") or []]
    rows.append(("total", f"{float(_total(timeline) or 0):6.0f} s", "vLLM's stamps are whole seconds"))
    width = max(len(name) for name, _, _ in rows)
    return "start timeline\n" + "\n".join(f"  {n:<{width}}  {s}  {d}".rstrip() for n, s, d in rows)


def render_line(timeline: Mapping[str, Any]) -> str:
    """The table in one line, for the journal and a reload's requesters (`launch --profile`, a wake)."""
    parts = [
        f"{p['name']} {_seconds(timeline, p['seconds'])}{_cell_extra(p)}"
        for p in timeline.get("phases") or []
    ]
    head = "wake timeline: " if kind_of(timeline) == WAKE else "start timeline: "
    return head + " · ".join(parts) + f" · total {_seconds(timeline, _total(timeline))}"


def render_starts(records: Sequence[Mapping[str, Any]]) -> str:
    """The starts side by side (oldest first), then what changed from each start to the next (a
    cold start against the last cold one, a wake against the last wake: see `changes`)."""
    names = _phase_names(records)
    head = ["phase"] + [str(r.get("ts", "?"))[:19] for r in records]
    rows = [head] + [[n] + [_cell(r, n) for r in records] for n in names]
    rows.append(["total"] + [_seconds(r["timeline"], _total(r["timeline"])) for r in records])
    rows.append(["kind"] + [_kind_cell(r) for r in records])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    for after, found in zip(records[1:], changes(records), strict=True):
        lines += [f"{str(after.get('ts', '?'))[:19]}: {change}" for change in found]
    return "\n".join(line.rstrip() for line in lines)


def changes(records: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """For each start after the first: what changed. Like is compared with like: a wake says only
    that it was one where a cold start came before it (no "faster disk"), and a cold start after a
    wake is compared with the cold start before the wake, so a compile cache miss is still named."""
    out: list[list[str]] = []
    for i in range(1, len(records)):
        now, previous = records[i]["timeline"], records[i - 1]["timeline"]
        found = [] if kind_of(previous) == kind_of(now) else compare(previous, now)
        like = next(
            (r["timeline"] for r in reversed(records[:i]) if kind_of(r["timeline"]) == kind_of(now)), None
        )
        out.append(found + (compare(like, now) if like is not None else []))
    return out


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What changed from one start to the next, in the order the phases run; between a cold start
    and a wake only that (their phases are not the same work)."""
    if kind_of(before) != kind_of(after):
        return [f"{KIND_TEXT[kind_of(after)]} (was {KIND_TEXT[kind_of(before)]})"]
    a, b = _by_name(before), _by_name(after)
    out = [
        _cache_change(a.get("compile"), b.get("compile")),
        _disk_change(a.get("weights"), b.get("weights")),
    ]
    out.append(_graph_change(a.get("graphs"), b.get("graphs")))
    for name, phase in b.items():
        old = a.get(name)
        if old is not None and _slower(float(old["seconds"]), float(phase["seconds"])):
            out.append(
                f"{name} took {_seconds(after, phase['seconds'])}, was {_seconds(after, old['seconds'])}"
            )
    return [text for text in out if text]


def kind_of(timeline: Mapping[str, Any]) -> str:
    """`cold` or `wake` (a record written before wakes kept one is a cold start's)."""
    return WAKE if timeline.get("kind") == WAKE else COLD


def _cache_change(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str | None:
    was, now = _detail_of(old, "cache"), _detail_of(new, "cache")
    if was == now or now is None:
        return None
    text = f"torch.compile cache {now} (was {was or 'not shown'})"
    old_dir, new_dir = _detail_of(old, "cache_dir"), _detail_of(new, "cache_dir")
    return text + (f"; cache dir now {new_dir}" if new_dir and old_dir and new_dir != old_dir else "")


def _disk_change(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str | None:
    was, now = _detail_of(old, "gb_per_s"), _detail_of(new, "gb_per_s")
    if was is None or now is None or now * SLOWER > was:
        return None
    cached_was, cached_now = _detail_of(old, "in_page_cache"), _detail_of(new, "in_page_cache")
    if cached_was is not None and cached_now is not None and cached_now < cached_was:
        why = f"{_share(cached_now)} of them in the page cache at the start, was {_share(cached_was)}"
    else:
        why = "a slower disk, or not in the page cache"
    return f"weights read at {now} GB/s, was {was} GB/s ({why})"


def _graph_change(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str | None:
    was, now = _detail_of(old, "count"), _detail_of(new, "count")
    if was is None or now is None or now <= was:
        return None
    return f"{now} CUDA graphs captured, was {was} (more capture sizes: max_num_seqs, capture size)"


def _slower(was: float, now: float) -> bool:
    return now - was >= MIN_GROWTH_S and now >= was * SLOWER


def _by_name(timeline: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(p["name"]): p for p in timeline.get("phases") or []}


def _detail_of(phase: Mapping[str, Any] | None, key: str) -> Any:
    return (phase or {}).get("detail", {}).get(key)


def _phase_names(records: Sequence[Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for record in records:
        names += [str(p["name"]) for p in record["timeline"].get("phases") or [] if p["name"] not in names]
    return names


def _cell(record: Mapping[str, Any], name: str) -> str:
    phase = _by_name(record["timeline"]).get(name)
    if phase is None:
        return "-"
    return _seconds(record["timeline"], phase["seconds"]) + _cell_extra(phase)


def _cell_extra(phase: Mapping[str, Any]) -> str:
    """What a phase's cell adds to its seconds: the compile cache, the weights' GB/s and page cache."""
    name = phase["name"]
    extras: list[str] = []
    if name == "compile" and _detail_of(phase, "cache") is not None:
        extras.append(str(_detail_of(phase, "cache")))
    if name == "weights" and _detail_of(phase, "gb_per_s") is not None:
        extras.append(f"{_detail_of(phase, 'gb_per_s')} GB/s")
    if name == "weights" and _detail_of(phase, "in_page_cache") is not None:
        extras.append(f"{_share(_detail_of(phase, 'in_page_cache'))} cached")
    return f" ({', '.join(extras)})" if extras else ""


def _share(value: Any) -> str:
    return f"{float(value):.0%}"


def _seconds(timeline: Mapping[str, Any], seconds: Any) -> str:
    """Whole seconds for a cold start (vLLM's stamps are); a wake's phases take fractions of one."""
    return f"{float(seconds or 0):.{2 if kind_of(timeline) == WAKE else 0}f} s"


def _total(timeline: Mapping[str, Any]) -> Any:
    return timeline.get("total_seconds", timeline.get("log_seconds"))


def _kind_cell(record: Mapping[str, Any]) -> str:
    failed = record.get("event") == "wake_failed" or record.get("passed") is False
    return kind_of(record["timeline"]) + (" (failed)" if failed else "")


def _detail(phase: Mapping[str, Any]) -> str:
    d = phase.get("detail") or {}
    parts = [str(phase.get("label", ""))]
    if d.get("gib") is not None:
        parts.append(f"{d['gib']} GiB in {d.get('load_seconds', '?')} s")
    if d.get("gb_per_s") is not None:
        parts.append(f"{d['gb_per_s']} GB/s")
    if d.get("in_page_cache") is not None:
        parts.append(f"{_share(d['in_page_cache'])} in the page cache at the start")
    if d.get("cache") is not None:
        parts.append(f"cache {d['cache']}" + (f" ({d['cache_dir']})" if d.get("cache_dir") else ""))
    if d.get("count") is not None:
        parts.append(f"{d['count']} graphs in {d.get('seconds', '?')} s")
    if d.get("kv_cache_gib") is not None:
        parts.append(f"KV {d['kv_cache_gib']} GiB")
    return " · ".join(p for p in parts if p)
