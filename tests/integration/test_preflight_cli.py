"""`launch preflight` as an operator runs it: a real process, the real NVML probe, exit codes 0/2/4."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.titled_procs import Spawner, alive

pytestmark = pytest.mark.integration
CHECKS = [
    "gpu_memory",
    "orphans",
    "one_model_per_gpu",
    "host_memory",
    "swap",
    "port",
    "model_path",
    "restart_guard",
    "compile_cache",
]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(tmp_path)
    try:
        yield spawner
    finally:
        spawner.close()


@pytest.fixture
def profile(profiles_dir: Path) -> tuple[str, int]:
    """A simulator profile (no GPU) on a free port, with its own vLLM process-title prefix."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    prefix = f"VLLMcli{uuid.uuid4().hex[:8]}"
    (profiles_dir / "sim.toml").write_text(
        f'[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "demo/tiny"\nport = {port}\n'
        f'[env]\nVLLM_PROCESS_NAME_PREFIX = "{prefix}"\n'
        "[preflight]\nreap_grace_s = 0.3\nreap_deadline_s = 5.0\n"
    )
    return prefix, port


def preflight(profiles_dir: Path, state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `launch` CLI in a process of its own (as a module: no need for the console script)."""
    launch = [sys.executable, "-m", "launcher.cli"]
    argv = [*launch, "--profiles-dir", str(profiles_dir), "--state-dir", str(state_dir)]
    return subprocess.run(
        [*argv, "preflight", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_every_check_is_reported_and_a_clean_host_passes(
    profiles_dir: Path, state_dir: Path, profile: tuple[str, int]
) -> None:
    run = preflight(profiles_dir, state_dir, "--profile", "sim")
    assert run.returncode == 0, run.stdout + run.stderr
    for name in CHECKS:
        assert f" {name} " in run.stdout, name
    assert (
        "skipped  gpu_memory" in run.stdout
        and "the simulator without --sim-gpu-allocate uses no GPU" in run.stdout
    )


def test_a_refusal_exits_4_with_the_reason_and_json_lists_every_check(
    profiles_dir: Path, state_dir: Path, profile: tuple[str, int], spawn: Spawner
) -> None:
    _, port = profile
    listener = spawn.child(port=port)

    run = preflight(profiles_dir, state_dir, "--profile", "sim", "--json")

    assert run.returncode == 4, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert [c["name"] for c in report["checks"]] == CHECKS
    assert report["refused"] is True
    assert {c["name"]: c["status"] for c in report["checks"]}["port"] == "refused"
    refusal = f"error: preflight refused to start profile 'sim': port: 127.0.0.1:{port} is in use"
    assert run.stderr.startswith(f"{refusal} by pid {listener.pid} ")
    assert "hint: stop what listens there" in run.stderr


def test_reap_orphans_ends_this_deployments_orphan(
    profiles_dir: Path, state_dir: Path, profile: tuple[str, int], spawn: Spawner
) -> None:
    prefix, _ = profile
    orphan = spawn.orphan(f"{prefix}::Worker_TP0", ignore_term=True)

    refused = preflight(profiles_dir, state_dir, "--profile", "sim")
    assert refused.returncode == 4
    assert f"pid {orphan.pid} {prefix}::Worker_TP0 (orphan: its parent is gone)" in refused.stdout

    reaped = preflight(profiles_dir, state_dir, "--profile", "sim", "--reap-orphans")
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    assert f"reaped   pid {orphan.pid} {prefix}::Worker_TP0: ended after SIGKILL" in reaped.stdout
    assert not alive(orphan.pid)


def test_bad_input_exits_2(profiles_dir: Path, state_dir: Path, profile: tuple[str, int]) -> None:
    forced = preflight(profiles_dir, state_dir, "--profile", "sim", "--force")
    assert forced.returncode == 2 and "--force and --reap-foreign only widen --reap-orphans" in forced.stderr
    missing = preflight(profiles_dir, state_dir, "--profile", "nope")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
