"""PNG plots from the summary, with matplotlib as the optional `[plots]` extra.

Every axis is linear, starts at zero and names its unit, so a 15 % drop looks like 15 % (a log or
truncated axis made one look like a collapse); concurrency ticks are the measured levels, not
powers of two; a categorical axis (the contexts) is drawn as categories, bars with no line
between; the title names model, profile, date and run; legends sit outside the data. Without
matplotlib the run still completes and says how to get the plots; nothing else changes.
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


def _ms(seconds: float | None) -> float:
    return float("nan") if seconds is None else seconds * 1000.0
