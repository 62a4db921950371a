"""The image recipe's Python layer, built without its base image: exactly what the Dockerfile's
COPY lines put in the image, built into a wheel offline, holds the launcher, the gates, their data
and the `launch` entry point. (The base image, vLLM's, cannot be fetched here; docs/fleet.md.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("wheel", reason="the wheel package builds the layer (it comes with the test extra)")
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "fleet" / "kubernetes" / "Dockerfile"


def copied_sources() -> list[str]:
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            sources += line.split()[1:-1]
    return sources


def test_the_copied_sources_build_the_package_offline(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    for source in copied_sources():
        path = ROOT / source
        if path.is_dir():
            shutil.copytree(path, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, context / source)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(tmp_path / "out"), str(context)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = (tmp_path / "out").glob("vllm_gate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"launcher/cli.py", "launcher/check.py", "gates/registry.py", "basis/clock.py",
            "vllm_flags/data/vllm-serve-schema-0.33.0.json", "vllm_sim/cli.py"} <= names  # fmt: skip
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"launch = launcher.cli:main" in entry_points
