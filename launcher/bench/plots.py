"""PNG plots from the summary, with matplotlib as the optional `[plots]` extra.

Without matplotlib the run still completes and says how to get the plots; nothing else changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
    written = [_throughput(plt, cells, out_dir / "throughput_vs_concurrency.png")]
    ttft = _ttft(plt, summary, out_dir / "ttft_vs_context.png")
    if ttft is not None:
        written.append(ttft)
    return written, None


def _throughput(plt: Any, cells: list[dict[str, Any]], path: Path) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for context in dict.fromkeys(c["context"] for c in cells):
        mine = sorted((c for c in cells if c["context"] == context), key=lambda c: c["concurrency"])
        xs = [c["concurrency"] for c in mine]
        left.plot(xs, [c["decode_tok_s"] for c in mine], marker="o", label=context)
        right.plot(xs, [c["total_tok_s"] for c in mine], marker="o", label=context)
    for axis, title in (
        (left, "decode tok/s per user (1 / ITL median)"),
        (right, "total tok/s (tokens / wall)"),
    ):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrency")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
        axis.legend(title="context")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ttft(plt: Any, summary: dict[str, Any], path: Path) -> Path | None:
    contexts = summary.get("contexts") or []
    if not contexts:
        return None
    warm = {
        c["context"]: c["ttft_s"]
        for c in summary["cells"]
        if c["concurrency"] == min(x["concurrency"] for x in summary["cells"])
    }
    names = [c["context"] for c in contexts]
    fig, axis = plt.subplots(figsize=(6.5, 4.2))
    axis.plot(names, [c["cold_ttft_s"] for c in contexts], marker="o", label="cold (unique prefix, alone)")
    axis.plot(names, [warm.get(n) for n in names], marker="s", label="warm (cached prefix, lowest c)")
    axis.set_yscale("log")
    axis.set_xlabel("context")
    axis.set_ylabel("TTFT (s)")
    axis.grid(True, alpha=0.3)
    axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
