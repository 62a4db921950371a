"""Whose orphan is it: preflight judges only what this deployment will use (docs/host-safety.md).

Real titled orphans (reparented to init) carrying a deployment mark, against `launch preflight`
in a process of its own: another deployment's orphan elsewhere is a warning and is never
signalled unless the operator names it; this deployment's own orphan refuses and is reaped.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.host.orphans import deployment_id, mark_env
from tests.simserver import running_sim
from tests.titled_procs import Spawner, alive

pytestmark = pytest.mark.integration


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(tmp_path)
    try:
        yield spawner
    finally:
        spawner.close()


@pytest.fixture
def profiles(profiles_dir: Path) -> Path:
    """A simulator profile with vLLM's default title prefix: titles say nothing about the owner."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    (profiles_dir / "sim.toml").write_text(
        f'[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "demo/tiny"\nport = {port}\n'
        "[preflight]\nreap_grace_s = 0.3\nreap_deadline_s = 5.0\n"
    )
    return profiles_dir


def preflight(profiles_dir: Path, state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "launcher.cli",
        "--profiles-dir",
        str(profiles_dir),
        "--state-dir",
        str(state_dir),
    ]
    return subprocess.run([*argv, "preflight", "--profile", "sim", *args],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_another_deployments_orphan_is_a_warning_and_is_never_signalled(
    profiles: Path, state_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    theirs = deployment_id(tmp_path / "other-state", "prod")
    orphan = spawn.orphan("VLLM::EngineCore", env=mark_env(theirs))

    report = preflight(profiles, state_dir, "--json")
    assert report.returncode == 0, report.stdout + report.stderr
    orphans = next(c for c in json.loads(report.stdout)["checks"] if c["name"] == "orphans")
    assert orphans["status"] == "warning"
    assert orphan.pid in orphans["foreign_orphans"]
    assert (
        f"deployment {theirs}, user " in orphans["detail"] and f"pid {orphan.pid}, age " in orphans["detail"]
    )

    reaped = preflight(profiles, state_dir, "--reap-orphans")
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    assert alive(orphan.pid), "--reap-orphans signalled another deployment's orphan"

    named = preflight(profiles, state_dir, "--reap-orphans", "--reap-foreign", str(orphan.pid))
    assert named.returncode == 0, named.stdout + named.stderr
    assert f"reaped   pid {orphan.pid} VLLM::EngineCore: ended after SIGTERM" in named.stdout
    assert not alive(orphan.pid)


def test_a_foreign_orphan_is_ended_when_its_deployment_is_named(
    profiles: Path, state_dir: Path, tmp_path: Path, spawn: Spawner
) -> None:
    orphan = spawn.orphan("VLLM::Worker_TP0", env=mark_env(deployment_id(tmp_path / "x", "other")))
    unknown = preflight(profiles, state_dir, "--reap-orphans", "--reap-foreign", "no-such-deployment")
    assert unknown.returncode == 2 and "nothing was signalled" in unknown.stderr
    assert "Traceback" not in unknown.stderr and alive(orphan.pid)
    named = preflight(profiles, state_dir, "--reap-orphans", "--reap-foreign", "other")
    assert named.returncode == 0, named.stdout + named.stderr
    assert not alive(orphan.pid)


def test_this_deployments_own_orphan_refuses_and_is_reaped(
    profiles: Path, state_dir: Path, spawn: Spawner
) -> None:
    orphan = spawn.orphan(
        "VLLM::EngineCore", ignore_term=True, env=mark_env(deployment_id(state_dir, "sim"))
    )
    refused = preflight(profiles, state_dir)
    assert refused.returncode == 4
    assert f"pid {orphan.pid} VLLM::EngineCore (orphan: its parent is gone)" in refused.stdout
    reaped = preflight(profiles, state_dir, "--reap-orphans")
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    assert not alive(orphan.pid)


def test_a_hand_started_server_on_the_port_refuses_with_a_hint_that_fits_it(
    profiles_dir: Path, state_dir: Path
) -> None:
    """`vllm serve` started by hand carries no deployment mark: no launcher will ever stop it."""
    with running_sim() as server:
        (profiles_dir / "sim.toml").write_text(
            f'[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "demo/tiny"\nport = {server.port}\n'
        )
        refused = preflight(profiles_dir, state_dir)
        assert refused.returncode == 4
        assert f"hint: pid {server.proc.pid} is a vLLM server no launcher started" in refused.stderr
        assert f"`kill {server.proc.pid}`" in refused.stderr
        reaped = preflight(profiles_dir, state_dir, "--reap-orphans")
        assert reaped.returncode == 4 and server.proc.poll() is None  # a live server is never reaped
