"""Issue 42's pure helpers (i42_watch.py; tests/unit/test_i42_series.py): the /metrics series a
stall rule could read, read out of vLLM's text; which of them moved between polls in a window (the
long chunked prefill: before its first output token); the figures of a set of runs.

Nothing here reads the clock, the network or a process: polls come in as recorded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The six /metrics series of the prefill check, as vLLM 0.26.0 names them (tests/data/real-vllm-0.26/
# eager/metrics-after.txt), plus the engine core's CPU seconds, which the poller adds.
SERIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:iteration_tokens_total_count",
)
CPU = "engine_core_cpu_s"


def read_series(text: str, names: Iterable[str] = SERIES) -> dict[str, float]:
    """Each named series summed over its label sets; a name the page lacks is absent. A line counts
    only where the name is followed by `{` or a space: `vllm:num_requests_waiting` is not
    `vllm:num_requests_waiting_by_reason`. NaN samples and unparsable values are skipped."""
    wanted = set(names)
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        cut = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
        name = line[:cut] if cut >= 0 else line
        if name not in wanted:
            continue
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (IndexError, ValueError):
            continue
        if not math.isnan(value):
            found[name] = found.get(name, 0.0) + value
    return found


def moved(polls: Sequence[Mapping[str, Any]], since: float, until: float) -> dict[str, dict[str, Any]]:
    """For each series seen in the polls ({"t": epoch, "values": {name: value}}) taken in
    [since, until), compared with the poll before it (the last one before `since` included, so a
    change at the very start counts): how many times it changed, when it first did (seconds after
    `since`), and its value at the first and the last of those polls."""
    ordered = sorted(polls, key=lambda p: float(p["t"]))
    before = [p for p in ordered if float(p["t"]) < since][-1:]
    inside = [p for p in ordered if since <= float(p["t"]) < until]
    names = sorted({n for p in before + inside for n in p["values"]})
    result: dict[str, dict[str, Any]] = {}
    for name in names:
        changes, first_at = 0, None
        previous = before[0]["values"].get(name) if before else None
        for poll in inside:
            value = poll["values"].get(name)
            if previous is not None and value is not None and value != previous:
                changes += 1
                first_at = first_at if first_at is not None else round(float(poll["t"]) - since, 3)
            previous = value if value is not None else previous
        values = [p["values"][name] for p in before + inside if name in p["values"]]
        result[name] = {
            "changes": changes,
            "first_change_s": first_at,
            "from": values[0] if values else None,
            "to": values[-1] if values else None,
        }
    return result


def moving(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The names that changed at least once, in order."""
    return [name for name, seen in summary.items() if seen["changes"] > 0]


def spread(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """Median, min and max of the values given (None skipped), and how many there were."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"n": 0, "median": None, "min": None, "max": None}
    middle = len(known) // 2
    median = known[middle] if len(known) % 2 else (known[middle - 1] + known[middle]) / 2
    return {
        "n": len(known),
        "median": round(median, 3),
        "min": round(known[0], 3),
        "max": round(known[-1], 3),
    }
