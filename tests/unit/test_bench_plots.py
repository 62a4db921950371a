"""Plots are optional: drawn with the `[plots]` extra, skipped with a note without it. With the
profile's starts in the summary, a start-time chart joins them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _phases(*pairs: tuple[str, float]) -> list[dict[str, Any]]:
    return [
        {"name": name, "label": f"{name} words", "seconds": seconds, "detail": {}} for name, seconds in pairs
    ]


# Two starts as the history keeps them: the second missed the compile cache and ran no graph capture.
STARTS = [
    {
        "ts": "2026-12-01T07:30:00.123Z",
        "event": "gates",
        "label": "demo@1a2b",
        "passed": True,
        "timeline": {
            "phases": _phases(("startup", 20.0), ("compile", 1.0), ("graphs", 2.0), ("outside_log", 5.5))
        },
    },
    {
        "ts": "2026-12-02T09:31:00.456Z",
        "event": "try",
        "label": "demo@3c4d",
        "passed": False,
        "timeline": {"phases": _phases(("startup", 36.0), ("compile", 10.0), ("outside_log", 6.5))},
    },
]


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


def test_the_start_time_chart_is_written_only_when_the_summary_has_starts(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written, note = plot({**SUMMARY, "starts": STARTS}, tmp_path / "with")
    assert note is None and "start_time.png" in [p.name for p in written]
    assert (tmp_path / "with" / "start_time.png").read_bytes().startswith(b"\x89PNG")
    written, note = plot({**SUMMARY, "starts": []}, tmp_path / "without")  # --url, or no start recorded
    assert note is None and sorted(p.name for p in written) == [
        "throughput_vs_concurrency.png",
        "ttft_vs_context.png",
    ]


def _figures() -> dict[str, object]:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from launcher.bench.plots import figures

    summary = {
        **SUMMARY,
        "starts": STARTS,
        "profile": "demo",
        "date": "2026-12-01 06:04 UTC",
        "run_id": "ab12cd34",
    }
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


def test_each_start_is_one_bar_of_its_phases_in_order_from_zero_seconds() -> None:
    fig = _figures()["start_time.png"]
    [axis] = fig.axes  # type: ignore[attr-defined]
    assert axis.get_xscale() == "linear" and axis.get_xlim()[0] == 0 and axis.get_xlabel() == "seconds (s)"
    assert axis.get_title() == "start time by phase"
    # the starts are categories, oldest on top, named by when and by what they were judged
    assert [t.get_text() for t in axis.get_yticklabels()] == [
        "2026-12-01 07:30:00 gates",
        "2026-12-02 09:31:00 try",
    ]
    assert axis.yaxis_inverted()
    segments: dict[int, list[tuple[float, float, str]]] = {0: [], 1: []}
    for bars in axis.containers:  # one container a phase name, over every start that has it
        for bar in bars:
            row = round(bar.get_y() + bar.get_height() / 2)
            segments[row].append((bar.get_x(), bar.get_width(), bars.get_label()))
    for row, start in enumerate(STARTS):
        drawn = sorted(segments[row])
        phases = start["timeline"]["phases"]  # type: ignore[index]
        assert [w for _, w, _ in drawn] == [p["seconds"] for p in phases]
        assert [label.split(":")[0] for _, _, label in drawn] == [p["name"] for p in phases]
        assert drawn[0][0] == 0
        assert all(a[0] + a[1] == pytest.approx(b[0]) for a, b in zip(drawn, drawn[1:], strict=False))
    assert [t.get_text().strip() for t in axis.texts] == ["28.5 s", "52.5 s"]  # each start's total


def test_a_phase_keeps_its_colour_and_one_legend_entry_across_starts() -> None:
    axis = _figures()["start_time.png"].axes[0]  # type: ignore[attr-defined]
    names = [bars.get_label() for bars in axis.containers]
    assert names == ["startup: startup words", "compile: compile words", "graphs: graphs words",
                     "outside_log: outside_log words"]  # fmt: skip
    for bars in axis.containers:
        assert len({bar.get_facecolor() for bar in bars}) == 1
    assert len({bars[0].get_facecolor() for bars in axis.containers}) == len(names)
    assert len(axis.containers[2]) == 1  # graphs: only the first start captured any


def test_the_bench_reads_the_profiles_starts_and_an_unreadable_history_costs_only_the_chart(
    tmp_path: Path,
) -> None:
    from launcher.commands.bench_cmd import _recorded_starts

    spawn = {"profile": "demo", "ts": "2026-12-02T09:30:00Z", "event": "start"}  # no timeline
    lines = [{"profile": "other", **STARTS[0]}, spawn, {"profile": "demo", **STARTS[1]}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    notes: list[str] = []
    assert _recorded_starts(tmp_path, "demo", notes) == [STARTS[1]] and notes == []  # demo's, with a timeline
    (tmp_path / "history.jsonl").unlink()
    (tmp_path / "history.jsonl").mkdir()  # not a file: the history cannot be read
    assert _recorded_starts(tmp_path, "demo", notes) == []
    assert len(notes) == 1 and notes[0].startswith("start-time chart skipped: cannot read the history")
