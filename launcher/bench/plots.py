"""PNG plots from the summary, with matplotlib as the optional `[plots]` extra.

Every axis is linear, starts at zero and names its unit, so a 15 % drop looks like 15 % (a log or
truncated axis made one look like a collapse); concurrency ticks are the measured levels, not
powers of two; a categorical axis (the contexts) is drawn as categories, bars with no line
between; the title names model, profile, date and run; legends sit outside the data. Without
matplotlib the run still completes and says how to get the plots; nothing else changes.

With `--profile`, the summary's `starts` (the profile's last starts, from the history) become a
start-time chart: one bar a start, its segments the phases vLLM's log showed, one colour a phase (a
sleeper's wake: its own phases, docs/logs.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

BAR_WIDTH = 0.38  # two bars a category, a gap between categories


def plot(summary: dict[str, Any], out_dir: Path) -> tuple[list[Path], str | None]:
    """(files written, a note when plots were skipped)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "plots skipped: matplotlib is not installed (pip install 'vllm-gate[plots]')"
    cells = summary.get("cells") or []
    if not cells:
        return [], "plots skipped: no cell was measured"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures(plt, summary).items():
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        written.append(out_dir / name)
    return written, None


def figures(plt: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """File name -> matplotlib figure, not yet saved (tests read their axes)."""
    out = {"throughput_vs_concurrency.png": _throughput(plt, summary)}
    ttft = _ttft(plt, summary)
    if ttft is not None:
        out["ttft_vs_context.png"] = ttft
    if summary.get("starts"):
        out["start_time.png"] = _start_time(plt, summary)
    return out


def title(summary: dict[str, Any]) -> str:
    """model · profile · date · run: what a plot pasted into a ticket must still say."""
    server = summary.get("server") or {}
    parts = [
        f"model {server.get('model') or '?'}",
        f"profile {summary['profile']}" if summary.get("profile") else str(server.get("url") or "url ?"),
        str(summary.get("date") or "date unknown"),
        f"run {summary.get('run_id') or '?'}",
    ]
    return " · ".join(parts)


def _zero_based(axis: Any, unit: str) -> None:
    axis.set_ylim(bottom=0)
    axis.set_ylabel(unit)
    axis.grid(True, alpha=0.3)


def _legend_below(fig: Any, axis: Any, title_text: str, columns: int) -> None:
    handles, labels = axis.get_legend_handles_labels()
    fig.legend(handles, labels, title=title_text, loc="lower center", ncol=max(1, columns), frameon=False)


def _throughput(plt: Any, summary: dict[str, Any]) -> Any:
    cells = summary["cells"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8))
    contexts = list(dict.fromkeys(c["context"] for c in cells))
    levels = sorted({c["concurrency"] for c in cells})
    for context in contexts:
        mine = sorted((c for c in cells if c["context"] == context), key=lambda c: c["concurrency"])
        xs = [c["concurrency"] for c in mine]
        left.plot(xs, [c["decode_tok_s"] for c in mine], marker="o", label=context)
        right.plot(xs, [c["total_tok_s"] for c in mine], marker="o", label=context)
    for axis, name in (
        (left, "decode per user (1 / ITL median)"),
        (right, "output throughput (output tokens / wall)"),
    ):
        axis.set_xticks(levels)
        axis.set_xlim(0, max(levels) * 1.05)
        axis.set_xlabel("concurrency (requests in flight)")
        axis.set_title(name, fontsize=10)
        _zero_based(axis, "tokens per second (tok/s)")
    fig.suptitle(title(summary), fontsize=10)
    _legend_below(fig, left, "context", len(contexts))
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def _ttft(plt: Any, summary: dict[str, Any]) -> Any:
    """Cold and warm TTFT per context, as bars side by side: the contexts are categories (two
    workloads, not points of one axis), so no line joins them to suggest values between."""
    contexts = summary.get("contexts") or []
    if not contexts:
        return None
    lowest = min(x["concurrency"] for x in summary["cells"])
    warm = {c["context"]: c["ttft_s"] for c in summary["cells"] if c["concurrency"] == lowest}
    names = [c["context"] for c in contexts]
    fig, axis = plt.subplots(figsize=(7, 4.8))
    ticks = list(range(len(names)))
    series = (
        ([_ms(c.get("cold_ttft_s")) for c in contexts], "cold: unique prefix, sent alone"),
        ([_ms(warm.get(n)) for n in names], f"warm: cached prefix, c{lowest} median"),
    )
    for offset, (values, label) in zip((-BAR_WIDTH / 2, BAR_WIDTH / 2), series, strict=True):
        axis.bar([t + offset for t in ticks], values, width=BAR_WIDTH, label=label)
    axis.set_xticks(ticks, names)
    axis.set_xlabel("context (prompt length)")
    axis.set_title("time to first token", fontsize=10)
    _zero_based(axis, "TTFT (ms)")
    fig.suptitle(title(summary), fontsize=10)
    _legend_below(fig, axis, "", 2)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def _start_time(plt: Any, summary: dict[str, Any]) -> Any:
    """One horizontal bar a start (oldest on top), stacked phase by phase in the order they ran; a
    phase keeps its colour on every bar, so a compile that grew from one start to the next shows."""
    starts = summary["starts"]
    phases = [s["timeline"]["phases"] for s in starts]
    labels = {p["name"]: str(p.get("label") or "") for each in phases for p in each}  # the newest words
    names = list(dict.fromkeys(p["name"] for each in phases for p in each))  # as they run, oldest first
    fig, axis = plt.subplots(figsize=(10, 1.6 + 0.45 * len(starts) + 0.25 * len(names)))
    for index, name in enumerate(names):
        rows, lefts, widths = _segments(phases, name)
        label = f"{name}: {labels[name]}" if labels[name] else name
        axis.barh(rows, widths, left=lefts, color=plt.get_cmap("tab10")(index % 10), label=label)
    totals = [sum(float(p["seconds"]) for p in each) for each in phases]
    for row, total in enumerate(totals):
        axis.text(total, row, f" {round(total, 1):g} s", va="center", fontsize=8)
    axis.set_yticks(range(len(starts)), [_start_label(s) for s in starts])
    axis.invert_yaxis()
    axis.set_xlim(0, max(totals) * 1.12 or 1.0)
    axis.set_xlabel("seconds (s)")
    axis.set_title("start time by phase", fontsize=10)
    axis.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title(summary), fontsize=10)
    _legend_below(fig, axis, "phase", 2)
    legend_in = 0.35 + 0.22 * ((len(names) + 1) // 2)
    fig.tight_layout(rect=(0, legend_in / fig.get_figheight(), 1, 1))
    return fig


def _segments(phases: list[list[dict[str, Any]]], name: str) -> tuple[list[int], list[float], list[float]]:
    """Where phase `name` sits on each start's bar that has it: (rows, lefts, widths) in seconds."""
    rows: list[int] = []
    lefts: list[float] = []
    widths: list[float] = []
    for row, each in enumerate(phases):
        elapsed = 0.0
        for phase in each:
            if phase["name"] == name:
                rows.append(row)
                lefts.append(elapsed)
                widths.append(float(phase["seconds"]))
            elapsed += float(phase["seconds"])
    return rows, lefts, widths


def _start_label(start: dict[str, Any]) -> str:
    """`2026-12-01 06:04:05 gates`: when the start was judged, and by what (a start, a try)."""
    when = str(start.get("ts") or "?")[:19].replace("T", " ")
    return f"{when} {start.get('event') or ''}".rstrip()


def _ms(seconds: float | None) -> float:
    return float("nan") if seconds is None else seconds * 1000.0
