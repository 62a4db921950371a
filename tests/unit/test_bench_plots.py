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
