"""The real `launch` against the real simulator: an engine that exits before it is ready is
rejected at `engine_start`, led by vLLM's whole cause sentence — not charged to the gate that was
waiting — in `launch try`'s report, `launch status` and the history."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.launcher_run import LAUNCH, LauncherFactory, free_port, write_profile

pytestmark = pytest.mark.integration

# 40 of 80 GiB free for a 0.95 share: the simulator's vLLM refuses as 0.33 does (vllm-facts.md §5.2)
TOO_LITTLE_FREE = {"gpu_memory_utilization": 0.95, "sim_free_memory_gib": 40}
FREE_MEMORY_SENTENCE = (
    "Free memory on device cuda:0 (40.00/80.00 GiB) on startup is less than desired GPU memory utilization "
    "(0.95, 76.00 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
)
MARKER_GATE = {"kernel_marker": {"patterns": ["FABLE_KERNELS_READY"]}}
NOT_RUN = "not run: vLLM exited before it was ready"


def launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        str(LAUNCH),
        "--profiles-dir",
        str(tmp_path / "profiles"),
        "--state-dir",
        str(tmp_path / "state"),
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_try_names_the_start_and_leads_with_vllms_whole_sentence(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path / "profiles", "svc", free_port(), args=TOO_LITTLE_FREE, gates=MARKER_GATE)
    done = launch(tmp_path, "try", "--profile", "svc")
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = next(line for line in done.stdout.splitlines() if line.startswith("  → "))
    assert verdict.startswith(f"  → rejected at engine_start: {FREE_MEMORY_SENTENCE} (free_memory; ")
    assert "rejected by" not in done.stdout
    assert str(tmp_path / "state" / "profiles" / "svc" / "logs" / "try.log") in verdict
    # One verdict: the gates vLLM's exit left unjudged are not run, none of them FAIL beside it
    # (was: `FAIL kernel_marker … FABLE_KERNELS_READY not seen` above `rejected at engine_start`).
    gates = [line.split()[:2] for line in done.stdout.splitlines()[1:] if not line.startswith("  → ")][:4]
    assert gates == [["----", "kernel_marker"], ["----", "graph_capture"], ["----", "health"],
                     ["----", "tool_call"]], done.stdout  # fmt: skip
    assert done.stdout.count(NOT_RUN) == 4 and "FAIL" not in done.stdout and "not seen" not in done.stdout
    as_json = json.loads(launch(tmp_path, "try", "--profile", "svc", "--json").stdout)
    assert as_json["engine_start"]["cause"] == FREE_MEMORY_SENTENCE
    assert as_json["engine_start"]["failure_kind"] == "free_memory"


def test_a_typo_the_dry_run_cannot_know_gets_vllms_list_as_a_did_you_mean(tmp_path: Path) -> None:
    """The simulator speaking 0.26 registers 0.26's reasoning parsers, which the launcher does not
    list: the dry run lets it through, and vLLM's own list of names gives the suggestion."""
    (tmp_path / "profiles").mkdir()
    write_profile(
        tmp_path / "profiles",
        "svc",
        free_port(),
        args={"sim_vllm_version": "0.26", "reasoning_parser": "qwen4"},
    )
    assert launch(tmp_path, "--profile", "svc", "--dry-run").returncode == 0
    done = launch(tmp_path, "try", "--profile", "svc")
    assert done.returncode == 1
    assert (
        "→ rejected at engine_start: Reasoning parser 'qwen4' not found. — did you mean qwen3? ("
        in done.stdout
    )


def test_serve_rolls_back_with_the_engine_start_verdict(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    port = free_port()
    write_profile(launcher.profiles, "svc", port)
    launcher.start()
    good = launcher.wait_phase("serving")
    write_profile(launcher.profiles, "svc", port, args=TOO_LITTLE_FREE)
    launcher.signal(signal.SIGHUP)
    status = launcher.wait_for(lambda s: s.get("reload_seq") == 1, timeout_s=60)
    assert status["phase"] == "serving_last_good", status
    assert status["serving_fingerprint"] == good["serving_fingerprint"]
    reason = status["rollback_reason"]
    assert (
        reason.startswith("candidate svc@")
        and f" rejected at engine_start: {FREE_MEMORY_SENTENCE} (free_memory; " in reason
    )
    assert (
        "rejected by" not in reason
        and str(launcher.state / "profiles" / "svc" / "logs" / "engine.log") in reason
    )
    rejected = next(r for r in launcher.history() if r["event"] == "rejected")
    assert rejected["reason"] == reason
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 3


def test_status_after_a_start_that_died_shows_one_verdict(tmp_path: Path) -> None:
    """Nothing else to serve: the status keeps the candidate's gates. The one that was waiting when
    vLLM exited, and those after it, read as not run beside the engine_start reason."""
    (tmp_path / "profiles").mkdir()
    write_profile(tmp_path / "profiles", "svc", free_port(), args=TOO_LITTLE_FREE, gates=MARKER_GATE)
    served = launch(tmp_path, "--profile", "svc")
    assert served.returncode == 1, served.stderr[-2000:]
    shown = launch(tmp_path, "status", "--profile", "svc")
    assert shown.returncode == 3 and "rejected at engine_start: Free memory on device" in shown.stdout
    gate_lines = [line for line in shown.stdout.splitlines() if line.startswith("  gate ")]
    names = ("kernel_marker", "graph_capture", "health", "tool_call")
    expected = [f"  gate {name}: not run — vLLM exited before it was ready" for name in names]
    assert gate_lines == expected, shown.stdout
