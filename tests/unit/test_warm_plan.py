"""The dry run says whether a change reads the candidate's weights ahead (`warm:`), and why not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from launcher.cli import launch

MIB = 1 << 20


def dry_run(tmp_path: Path, model: str, extra: str = "", *args: str) -> Any:
    profiles, state = tmp_path / "profiles", tmp_path / "state"
    profiles.mkdir(exist_ok=True)
    (profiles / "p.toml").write_text(
        f'[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "{model}"\nport = 8000\n{extra}',
        encoding="utf-8",
    )
    base = ["--profiles-dir", str(profiles), "--state-dir", str(state), "--profile", "p", "--dry-run", *args]
    return CliRunner().invoke(launch, base)


def local_model(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    root.mkdir()
    for index in range(2):
        (root / f"model-{index}.safetensors").write_bytes(b"\0" * MIB)
    return root


def test_a_local_model_dir_is_read_ahead_and_the_plan_says_how_much(tmp_path: Path) -> None:
    root = local_model(tmp_path)
    shown = dry_run(tmp_path, str(root))
    assert shown.exit_code == 0, shown.output
    assert "warm: before production is parked or stopped, 0.00 GiB of weights (2 files)" in shown.output
    plan = json.loads(dry_run(tmp_path, str(root), "", "--json").output)["warm"]
    assert plan["files"] == 2 and plan["total_bytes"] == 2 * MIB and plan["skipped"] is None


def test_host_ram_that_cannot_hold_them_is_the_reason_shown(tmp_path: Path) -> None:
    root = local_model(tmp_path)
    shown = dry_run(tmp_path, str(root), "[preflight]\nmin_host_available_gib = 1000000\n")
    assert "warm: weights not read ahead of a change: host RAM:" in shown.output


def test_a_hub_name_and_the_switch_off_are_shown_with_their_reason(tmp_path: Path) -> None:
    assert "'org/model' is a hub name" in dry_run(tmp_path, "org/model").output
    off = dry_run(tmp_path, str(local_model(tmp_path)), "[supervisor]\nwarm_weights = false\n")
    assert "warm: weights not read ahead of a change: warm_weights = false" in off.output


def test_the_last_change_s_figure_comes_from_the_history(tmp_path: Path) -> None:
    root = local_model(tmp_path)
    (tmp_path / "state").mkdir()
    warm = {
        "files": 2,
        "bytes": 2 * MIB,
        "total_bytes": 2 * MIB,
        "seconds": 0.5,
        "gb_s": 4.19,
        "complete": True,
    }
    record = {"ts": "2026-01-01T00:00:00Z", "event": "reload", "profile": "p", "warm": warm}
    (tmp_path / "state" / "history.jsonl").write_text(json.dumps(record) + "\n")
    shown = dry_run(tmp_path, str(root))
    assert "the last change's: 0.00 GiB in 0.5 s at 4.19 GB/s" in shown.output


def test_a_bad_warm_weights_value_is_refused(tmp_path: Path) -> None:
    shown = dry_run(tmp_path, "org/model", '[supervisor]\nwarm_weights = "yes"\nwarm_weights_timeout_s = 0\n')
    assert shown.exit_code == 2
    assert "warm_weights" in shown.output and "warm_weights_timeout_s" in shown.output
