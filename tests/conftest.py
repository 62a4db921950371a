"""Shared fixtures: a scratch profiles dir and state dir per test; the repository's own profiles."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["tests.bytecode", "pytester"]  # bytecode caches; a pytest run in a test

REPO = Path(__file__).resolve().parent.parent
SHIPPED_PROFILES = REPO / "profiles"


@pytest.fixture
def profiles_dir(tmp_path: Path) -> Path:
    path = tmp_path / "profiles"
    path.mkdir()
    return path


@pytest.fixture
def shipped_profiles(tmp_path: Path) -> Path:
    """A copy of the repository's profiles/, so tests may edit it."""
    path = tmp_path / "shipped"
    shutil.copytree(SHIPPED_PROFILES, path)
    return path


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes: 'nothing changed' is asserted by comparing two of these."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
