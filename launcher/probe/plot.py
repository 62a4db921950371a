"""probe.png: one panel per metric, a bar per arm and cell, the runs' min–max as the error bar.

matplotlib is the optional `[plots]` extra; without it the probe completes and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launcher.probe.compare import METRICS, ArmResult, MetricKey


def plot(compared: Sequence[ArmResult], path: Path) -> str | None:
    """Write the PNG; returns a note when it was skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "probe.png skipped: matplotlib is not installed (pip install 'vllm-gate[plots]')"
    measured = [a for a in compared if a.stats]
    if not measured:
        return "probe.png skipped: no arm was measured"
    fig = figure(plt, measured)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def figure(plt: Any, measured: Sequence[ArmResult]) -> Any:
    """The figure, not yet saved; one legend for all panels, below them, where it covers no bar."""
    metrics = [m for m in METRICS if any(k.metric == m for a in measured for k in a.stats)]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4.6), squeeze=False)
    for axis, metric in zip(axes[0], metrics, strict=True):
        _panel(axis, measured, metric)
    fig.suptitle("launch probe: arms (bars: median of runs; whiskers: min–max of runs)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, title="arm", loc="lower center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def _panel(axis: Any, arms: Sequence[ArmResult], metric: str) -> None:
    keys = sorted({k for a in arms for k in a.stats if k.metric == metric})
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        xs, ys, low, high = [], [], [], []
        for j, key in enumerate(keys):
            stat = arm.stats.get(key)
            used = [stat.runs[u - 1] for u in stat.used] if stat else []
            values = [v for v in used if v is not None]
            if stat is None or stat.value is None or not values:
                continue
            xs.append(j + (i - (len(arms) - 1) / 2) * width)
            ys.append(stat.value)
            low.append(stat.value - min(values))
            high.append(max(values) - stat.value)
        axis.bar(xs, ys, width=width, yerr=[low, high], capsize=3, label=arm.name)
    axis.set_xticks(range(len(keys)), [_cell(k) for k in keys])
    info = METRICS[metric]
    axis.set_title(f"{info.label} ({info.better} is better)")
    axis.set_ylabel(info.unit)
    axis.set_ylim(bottom=0)
    axis.grid(True, axis="y", alpha=0.3)


def _cell(key: MetricKey) -> str:
    return key.cell
