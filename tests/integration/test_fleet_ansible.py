"""fleet/ansible for real: ansible-core drives three "hosts" on this machine (local connection, each
its own profiles dir, state dir, port and launcher on the simulator). The change is one that the
second host's model cannot take (its config says 4096 positions): the play must stop there, that
host must serve its last-good, the first the change, the third be untouched; then the rollback
playbook brings every host back to the tagged profile."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.launcher_run import LAUNCH, Launcher, append_table, free_port, write_profile

pytest.importorskip("ansible", reason="ansible-core is not installed (it comes with the test extra)")
pytestmark = pytest.mark.integration

PLAYBOOKS = Path(__file__).resolve().parents[2] / "fleet" / "ansible"
PLAYBOOK_BIN = Path(sys.executable).with_name("ansible-playbook")
HOSTS = ("gpu-a", "gpu-b", "gpu-c")
PLANTED = "gpu-b"  # its model's config.json allows 4096 positions: max_model_len=8192 is refused
CHANGE = {"vllm_gate_tag": "long_ctx", "vllm_gate_changes": ["max_model_len=8192"]}


@dataclass
class Host:
    name: str
    launcher: Launcher
    port: int

    def status(self) -> dict[str, Any]:
        done = subprocess.run(
            [
                str(LAUNCH),
                "--profiles-dir",
                str(self.launcher.profiles),
                "--state-dir",
                str(self.launcher.state),
                "status",
                "--profile",
                "svc",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return dict(json.loads(done.stdout)["profiles"][0])

    def profile_text(self) -> str:
        return (self.launcher.profiles / "svc.toml").read_text()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[dict[str, Host]]:
    if not PLAYBOOK_BIN.exists():
        pytest.skip(f"{PLAYBOOK_BIN} is missing (ansible-core installed without its scripts)")
    hosts: dict[str, Host] = {}
    try:
        for name in HOSTS:
            root = tmp_path / name
            (root / "profiles").mkdir(parents=True)
            port = free_port()
            args = {"sim_model_max_len": 4096} if name == PLANTED else {}
            path = write_profile(root / "profiles", "svc", port, args=args)
            # Its own deployment: other checkouts' orphans on this shared host do not block its reloads.
            append_table(path, "env", {"VLLM_PROCESS_NAME_PREFIX": f"Fleet{name[-1].upper()}"})
            hosts[name] = Host(name, Launcher(root / "profiles", root / "state", "svc").start(), port)
        for host in hosts.values():
            host.launcher.wait_phase("serving", timeout_s=60)
        yield hosts
    finally:
        left = []
        for host in hosts.values():  # only the launchers this test started, by pid
            proc = host.launcher.proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
            left += host.launcher.cleanup()
        assert left == [], f"processes were left behind: {left}"


def inventory(tmp_path: Path, hosts: dict[str, Host]) -> Path:
    path = tmp_path / "inventory.json"  # JSON is YAML: no YAML writer needed here
    path.write_text(
        json.dumps(
            {
                "vllm_gate": {
                    "hosts": {
                        h.name: {
                            "vllm_gate_profiles_dir": str(h.launcher.profiles),
                            "vllm_gate_state_dir": str(h.launcher.state),
                        }
                        for h in hosts.values()
                    },
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable,
                        "vllm_gate_launch": str(LAUNCH),
                        "vllm_gate_profile": "svc",
                        "vllm_gate_reload_timeout_s": 60,
                    },
                }
            }
        )
    )
    return path


def play(
    tmp_path: Path, hosts: dict[str, Host], playbook: str, extra: dict[str, Any]
) -> tuple[int, str, float]:
    home = tmp_path / "ansible-home"
    env = {
        **os.environ,
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TMP": str(home / "remote"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_CONFIG": str(tmp_path / "no-ansible.cfg"),
    }
    argv = [
        str(PLAYBOOK_BIN),
        "-i",
        str(inventory(tmp_path, hosts)),
        str(PLAYBOOKS / playbook),
        "-e",
        json.dumps(extra),
    ]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    took = time.monotonic() - started
    (tmp_path / f"{playbook}.log").write_text(done.stdout + done.stderr)
    return done.returncode, done.stdout + done.stderr, took


def test_rollout_stops_at_the_failing_host_and_rollback_brings_the_fleet_back(
    tmp_path: Path, fleet: dict[str, Host]
) -> None:
    """One fleet for both plays: the rollback undoes the state the stopped rollout really left."""
    before = {name: host.status() for name, host in fleet.items()}
    profiles_before = {name: host.profile_text() for name, host in fleet.items()}
    code, out, took = play(tmp_path, fleet, "rollout.yml", CHANGE)
    print(f"ansible rollout.yml, 3 hosts, stopped at the 2nd: {took:.1f} s")
    assert code == 2, out  # ansible-playbook: a host failed
    after = {name: host.status() for name, host in fleet.items()}
    # before the failing host: serves the change
    assert (
        after["gpu-a"]["phase"] == "serving"
        and after["gpu-a"]["fingerprint"] != before["gpu-a"]["fingerprint"]
    )
    assert "max_model_len = 8192" in fleet["gpu-a"].profile_text()
    # the failing host: rejected by vLLM's own check, back on its last-good by itself
    assert after["gpu-b"]["phase"] == "serving_last_good"
    assert after["gpu-b"]["fingerprint"] == before["gpu-b"]["fingerprint"]
    reason = after["gpu-b"]["rollback_reason"]
    assert "rejected at engine_start" in reason and "max_model_len (8192) is greater" in reason, reason
    assert after["gpu-b"]["profile_fingerprint"] not in (None, after["gpu-b"]["fingerprint"])  # not served
    # after it: untouched — same launch, same file, no snapshot, never reached by the play
    assert (
        after["gpu-c"]["fingerprint"] == before["gpu-c"]["fingerprint"] and after["gpu-c"]["reload_seq"] == 0
    )
    assert fleet["gpu-c"].profile_text() == profiles_before["gpu-c"]
    assert not (fleet["gpu-c"].launcher.profiles / "svc.toml.bak_long_ctx").exists()
    assert "gpu-c" not in out
    # the play's own report: what serves on each host it reached
    assert "gpu-a: serving" in out and "gpu-b: serving_last_good" in out
    assert re.search(r"gpu-a +: ok=\d+ +changed=1 .* failed=0", out) and re.search(
        r"gpu-b +: .* failed=[1-9]", out
    )

    code, out, took = play(tmp_path, fleet, "rollback.yml", {"vllm_gate_tag": "long_ctx"})
    print(f"ansible rollback.yml, 3 hosts (2 rolled back): {took:.1f} s")
    assert code == 0, out
    for name, host in fleet.items():
        status = host.status()
        assert status["serving"] and status["fingerprint"] == before[name]["fingerprint"], name
        assert status["profile_fingerprint"] == status["fingerprint"], name
        assert host.profile_text() == profiles_before[name], name
    assert fleet["gpu-c"].status()["reload_seq"] == 0  # never had the change: nothing to undo
    assert all(f"{name}: serving" in out for name in HOSTS)


def test_the_playbooks_pass_ansibles_syntax_check(tmp_path: Path) -> None:
    if not PLAYBOOK_BIN.exists():
        pytest.skip(f"{PLAYBOOK_BIN} is missing")
    inv = tmp_path / "inventory.yml"
    shutil.copy(PLAYBOOKS / "inventory.example.yml", inv)
    for playbook in ("rollout.yml", "rollback.yml"):
        done = subprocess.run(
            [str(PLAYBOOK_BIN), "--syntax-check", "-i", str(inv), str(PLAYBOOKS / playbook)],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **os.environ,
                "ANSIBLE_HOME": str(tmp_path / "home"),
                "ANSIBLE_LOCAL_TEMP": str(tmp_path / "t"),
            },
        )
        assert done.returncode == 0, done.stdout + done.stderr
