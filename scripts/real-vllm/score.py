"""A fidelity score per recorded run: the share of checks where the simulator agrees with the real
vLLM, by kind — events (the parser's event sequence and facts), line formats (named lines, their
order, shape and `[file.py:N]`, content, tracebacks), HTTP shapes and metric families (where the run
recorded its HTTP bodies). Checks marked `host` are left out of the count: those that depend on the
machine (the fd-limit warning) or on what the model wrote (a random-weight model's `required` call)."""

from __future__ import annotations

from logdiff import Row

KINDS = {
    "events": ("events", "facts"),
    "line formats": ("lines", "order", "sources", "content", "tracebacks"),
    "HTTP shapes": ("http",),
    "metric families": ("metrics",),
}


def score(rows: list[Row]) -> dict[str, tuple[int, int]]:
    """(agreeing, counted) checks per kind; kinds with no check are absent."""
    out: dict[str, tuple[int, int]] = {}
    for kind, sections in KINDS.items():
        counted = [r for r in rows if r.section in sections and r.verdict != "host"]
        if counted:
            out[kind] = (sum(r.verdict == "same" for r in counted), len(counted))
    return out


def cell(value: tuple[int, int] | None) -> str:
    if value is None:
        return "—"
    same, total = value
    return f"{100 * same / total:.0f}% ({same}/{total})"


def markdown(scores: dict[str, dict[str, tuple[int, int]]]) -> str:
    """The table docs/simulator.md shows: one row per recorded run."""
    lines = ["| recorded run | " + " | ".join(KINDS) + " |", "|---" * (len(KINDS) + 1) + "|"]
    for run, kinds in scores.items():
        lines.append(f"| `{run}` | " + " | ".join(cell(kinds.get(k)) for k in KINDS) + " |")
    return "\n".join(lines)
