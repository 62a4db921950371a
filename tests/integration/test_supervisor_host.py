"""The supervisor with the host layer: the restart-loop guard and the sd_notify sequence, for real."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.launcher_run import LAUNCH, Launcher, append_table, free_port, write_profile

pytestmark = pytest.mark.integration


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    (tmp_path / "profiles").mkdir()
    made = Launcher(tmp_path / "profiles", tmp_path / "state", "svc")
    yield made
    assert made.cleanup() == []


def test_a_candidate_that_always_fails_is_not_retried_after_n_failures(launcher: Launcher) -> None:
    path = write_profile(launcher.profiles, "svc", free_port(), args={"sim_capture_fallback": True})
    append_table(path, "preflight", {"restart_max_failures": 2, "restart_window_s": 600})
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "--profile", "svc"]  # fmt: skip
    for _ in range(2):
        assert subprocess.run(argv, capture_output=True, timeout=60).returncode == 1
    starts = [r for r in launcher.history() if r["event"] == "start"]
    third = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert third.returncode == 4  # a refusal: systemd's RestartPreventExitStatus stops the loop
    assert [r for r in launcher.history() if r["event"] == "start"] == starts  # not even started
    status = launcher.status()
    assert status["phase"] == "failed"
    assert "not retried" in status["detail"] and "2" in status["detail"]
    assert "error: restart guard:" in third.stderr and "Traceback" not in third.stderr


def test_systemd_hears_ready_only_once_promoted_then_stopping(launcher: Launcher, tmp_path: Path) -> None:
    sock_path = tmp_path / "notify.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(sock_path))
    server.settimeout(30)
    write_profile(launcher.profiles, "svc", free_port())
    os.environ["NOTIFY_SOCKET"] = str(sock_path)
    try:
        launcher.start()
    finally:
        del os.environ["NOTIFY_SOCKET"]
    messages: list[dict[str, Any]] = []
    try:
        while not any("READY" in m for m in messages):
            messages.append(_datagram(server))
        promoted = [r["event"] for r in launcher.history()]
        assert "promoted" in promoted, "READY=1 came before the promotion was recorded"
        launcher.signal(signal.SIGTERM)
        while not any("STOPPING" in m for m in messages):
            messages.append(_datagram(server))
        assert launcher.wait_exit() == 0
    finally:
        server.close()
    statuses = [m.get("STATUS", "") for m in messages]
    assert statuses[0].startswith("starting: candidate svc@")
    ready = next(m for m in messages if "READY" in m)
    assert ready["READY"] == "1" and ready["STATUS"].startswith("serving candidate svc@")
    assert list(messages[-1])[0] == "STOPPING"
    assert sum("READY" in m for m in messages) == 1


def _datagram(server: socket.socket) -> dict[str, str]:
    data = server.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)


def test_the_smoke_gate_passes_on_the_simulator(launcher: Launcher) -> None:
    write_profile(launcher.profiles, "svc", free_port(), order=["health", "smoke"],
                  gates={"smoke": {"needle_contexts": [1500]}})  # fmt: skip
    proc = subprocess.run(
        [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
         "try", "--profile", "svc", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    smoke = next(g for g in json.loads(proc.stdout)["gates"] if g["name"] == "smoke")
    assert proc.returncode == 0, smoke
    assert smoke["evidence"]["results"] == {k: "ok" for k in
        ("arithmetic", "chinese", "code", "needle", "consistency", "concurrency")}  # fmt: skip


def test_try_skip_preflight_shows_vllms_own_free_memory_failure(launcher: Launcher) -> None:
    path = write_profile(
        launcher.profiles, "svc", free_port(), args={"sim_free_memory_gib": 2}, order=["health"]
    )
    append_table(path, "preflight", {"min_host_available_gib": 1_000_000})  # preflight refuses this host
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state),
            "try", "--profile", "svc", "--json"]  # fmt: skip
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 4 and "min_host_available_gib" in refused.stderr
    assert not (launcher.state / "profiles" / "svc" / "logs" / "try.log").exists()  # nothing started
    ran = subprocess.run([*argv, "--skip-preflight"], capture_output=True, text=True, timeout=60)
    health = json.loads(ran.stdout)["gates"][0]
    assert ran.returncode == 1, ran.stderr
    # Whichever process of the engine's group ends first is named: the API server, or its engine
    # core (group_watch), both with vLLM's own cause. The core's exit code is read from its zombie,
    # unless the API server reaped it first (seen on a loaded host): then the watch says so.
    assert re.match(
        r"engine (VLLM::EngineCore pid \d+ )?exited (with code 1|\(status not readable: its parent "
        r"collected it first\)) \(free_memory: ValueError: Free memory on device",
        health["summary"],
    ), health["summary"]
    assert health["evidence"]["failure_kind"] == "free_memory"
