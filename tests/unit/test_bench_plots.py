"""Plots are optional: drawn with the `[plots]` extra, skipped with a note without it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.bench.plots import plot

SUMMARY = {
    "contexts": [{"context": "short", "cold_ttft_s": 0.02}, {"context": "8k", "cold_ttft_s": 0.9}],
    "cells": [
        {
            "context": ctx,
            "concurrency": c,
            "decode_tok_s": 100.0 / c**0.3,
            "total_tok_s": 95.0 * c**0.8,
            "ttft_s": t,
        }
        for ctx, t in (("short", 0.01), ("8k", 0.05))
        for c in (1, 2, 4, 8)
    ],
}


def test_without_matplotlib_the_plots_are_skipped_with_a_note(tmp_path: Path) -> None:
    # A fresh interpreter in which `import matplotlib` fails, as on a host without the extra.
    code = (
        "import sys, json; from pathlib import Path; sys.modules['matplotlib'] = None\n"
        "from launcher.bench.plots import plot\n"
        "print(json.dumps(plot(json.loads(sys.argv[1]), Path(sys.argv[2]))[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(SUMMARY), str(tmp_path / "p")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "pip install 'vllm-gate[plots]'" in json.loads(done.stdout)
    assert not (tmp_path / "p").exists()


def test_with_matplotlib_two_pngs_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written, note = plot(SUMMARY, tmp_path)
    assert note is None
    assert sorted(p.name for p in written) == ["throughput_vs_concurrency.png", "ttft_vs_context.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)


def _figures() -> dict[str, object]:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from launcher.bench.plots import figures

    summary = {**SUMMARY, "profile": "demo", "date": "2026-12-01 06:04 UTC", "run_id": "ab12cd34"}
    summary["server"] = {"model": "tiny-qwen", "url": "http://127.0.0.1:8000"}
    return figures(plt, summary)


def test_every_plot_is_titled_with_model_profile_date_and_run() -> None:
    for fig in _figures().values():
        text = fig._suptitle.get_text()  # type: ignore[attr-defined]
        for part in ("tiny-qwen", "profile demo", "2026-12-01", "ab12cd34"):
            assert part in text, text


def test_axes_are_linear_zero_based_with_units_and_the_measured_levels_as_ticks() -> None:
    figs = _figures()
    throughput = figs["throughput_vs_concurrency.png"].axes  # type: ignore[attr-defined]
    ttft = figs["ttft_vs_context.png"].axes  # type: ignore[attr-defined]
    for axis in [*throughput, *ttft]:
        assert axis.get_yscale() == "linear" and axis.get_xscale() == "linear"
        assert axis.get_ylim()[0] == 0
        assert "(" in axis.get_ylabel() and ")" in axis.get_ylabel()  # a unit: (tok/s), (ms)
    for axis in throughput:
        assert list(axis.get_xticks()) == [1, 2, 4, 8]
    assert ttft[0].get_ylabel() == "TTFT (ms)"
    cold = ttft[0].containers[0]
    assert max(bar.get_height() for bar in cold) == pytest.approx(900.0)  # 0.9 s shown as 900 ms


def test_contexts_are_categories_side_by_side_never_joined_by_a_line() -> None:
    """`short` and `8k` are two workloads, not two points of one axis: a line between them claimed a
    trend through values never measured (issue 44). Each context is one tick with its own bars."""
    axis = _figures()["ttft_vs_context.png"].axes[0]  # type: ignore[attr-defined]
    joined = [line for line in axis.lines if len(line.get_xdata()) > 1 and line.get_linestyle() != "None"]
    assert joined == []
    assert [label.get_text() for label in axis.get_xticklabels()] == ["short", "8k"]
    cold, warm = axis.containers
    assert [bar.get_height() for bar in cold] == pytest.approx([20.0, 900.0])
    assert [bar.get_height() for bar in warm] == pytest.approx([10.0, 50.0])  # c1 medians
    ticks = list(axis.get_xticks())
    for bars in (cold, warm):  # each context's bars sit around its own tick, apart from the other's
        centres = [bar.get_x() + bar.get_width() / 2 for bar in bars]
        assert [round(c) for c in centres] == ticks and centres[0] + bars[0].get_width() / 2 < ticks[1]


def test_legends_sit_outside_every_axis() -> None:
    for fig in _figures().values():
        assert fig.legends, "a figure-level legend"  # type: ignore[attr-defined]
        assert all(axis.get_legend() is None for axis in fig.axes)  # type: ignore[attr-defined]
        fig.canvas.draw()  # type: ignore[attr-defined]
        box = fig.legends[0].get_window_extent()  # type: ignore[attr-defined]
        for axis in fig.axes:  # type: ignore[attr-defined]
            assert not box.overlaps(axis.get_window_extent()), "the legend covers a plot"
