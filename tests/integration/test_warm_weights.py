"""The candidate's weights read into the page cache before production is parked for a change: the
real `launch` serving the real simulator from a local model dir whose files were evicted, a change
applied with the real `launch set --apply`, the files' residency read back with mincore(2)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.launcher_run import LAUNCH, LauncherFactory, free_port, write_profile
from tests.page_residency import resident_share, write_evicted

pytestmark = pytest.mark.integration

MIB = 1 << 20


def launch(launcher: Any, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def serve_from_dir(launcher_factory: LauncherFactory, model: Path) -> Any:
    launcher = launcher_factory()
    supervisor = {"park": "sleep", "park_port": free_port()}
    path = write_profile(launcher.profiles, "svc", free_port(), supervisor=supervisor)
    path.write_text(path.read_text().replace('model = "test/sim-1b"', f"model = {json.dumps(str(model))}"))
    launcher.start()
    launcher.wait_phase("serving")
    return launcher


def test_a_change_reads_the_candidate_s_weights_into_the_page_cache_while_production_serves(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    files = [write_evicted(model / f"model-0000{i}-of-00003.safetensors", 2 * MIB) for i in range(3)]
    (model / "config.json").write_text("{}")
    launcher = serve_from_dir(launcher_factory, model)
    if max(map(resident_share, files)) > 0.5:
        pytest.skip("this filesystem keeps pages DONTNEED should drop: eviction cannot be shown here")
    done = launch(launcher, "set", "svc", "max_num_seqs=2", "--tag", "two", "--apply", "--timeout-s", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    records = launcher.history()
    reload = next(r for r in records if r["event"] == "reload")
    warm = reload["warm"]
    assert (warm["files"], warm["bytes"], warm["total_bytes"], warm["complete"]) == (
        3,
        6 * MIB,
        6 * MIB,
        True,
    )
    assert isinstance(warm["seconds"], float) and "gb_s" in warm  # the figure is recorded (bench/ judges it)
    # all of it read; a loaded host may evict a page again before it is asked (seen under a CI run)
    assert min(resident_share(f) for f in files) > 0.99
    # the timeline keeps beside each start's weights phase how much of them the page cache held:
    # nothing at the first start (evicted; the simulator reads no weights), all after the read-ahead
    shares = [
        next(p for p in r["timeline"]["phases"] if p["name"] == "weights")["detail"].get("in_page_cache")
        for r in records
        if r["event"] == "gates" and r.get("timeline")
    ]
    assert len(shares) == 2 and shares[0] < 0.5 < 0.99 < shares[1], shares
    # read while production still served: before it was parked for the change
    events = [r["event"] for r in records]
    assert events.index("reload") < events.index("parked")
    shown = launch(launcher, "--profile", "svc", "--dry-run")
    assert "warm: before production is parked or stopped, 0.01 GiB of weights (3 files)" in shown.stdout
    assert "the last change's: 0.01 GiB in" in shown.stdout
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
