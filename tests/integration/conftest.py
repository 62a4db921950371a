"""Fixtures shared by the integration tests that drive the real `launch`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launcher_run import Launcher, LauncherFactory


@pytest.fixture
def launcher_factory(tmp_path: Path) -> Iterator[LauncherFactory]:
    """Launchers on one scratch profiles/state dir; after the test, nothing they started may be left."""
    made: list[Launcher] = []

    def make(profile: str = "svc") -> Launcher:
        launcher = Launcher(tmp_path / "profiles", tmp_path / "state", profile)
        made.append(launcher)
        return launcher

    (tmp_path / "profiles").mkdir()
    yield make
    leftovers = [item for launcher in made for item in launcher.cleanup()]
    said = "".join(f"\n--- {[r['event'] for r in m.history()]}\n{m.output()[-2000:]}" for m in made)
    assert leftovers == [], f"processes were left behind: {leftovers}{said if leftovers else ''}"
