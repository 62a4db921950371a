"""How production runs: systemd told apart by the launcher's own cgroup, a live launcher read from
the state dir and /proc (a child process stands in for it), and the record that restarts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from launcher.probe.production import Mode, Production, discover, unit_from_cgroup, unit_instance
from launcher.supervisor.history import utc_now

# /proc/PID/cgroup as systemd hosts write it (cgroup v2, then a v1 host's name=systemd line).
SYSTEM_V2 = "0::/system.slice/system-vllm\\x2dgate.slice/vllm-gate@prod.service\n"
SYSTEM_V1 = "12:memory:/system.slice\n1:name=systemd:" + SYSTEM_V2.split("::", 1)[1]
USER_UNIT = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/vllm-gate@prod.service\n"
TERMINAL = "0::/user.slice/user-1000.slice/session-3.scope\n"
OTHER_SERVICE = (
    "0::/system.slice/ssh.service\n"  # a launcher started from an ssh session inherits INVOCATION_ID
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SYSTEM_V2, ("vllm-gate@prod.service", False)),
        (SYSTEM_V1, ("vllm-gate@prod.service", False)),
        (USER_UNIT, ("vllm-gate@prod.service", True)),
        (TERMINAL, None),
        (OTHER_SERVICE, None),
        (SYSTEM_V2.replace("@prod", "@spark"), None),  # another profile's unit is not this one's
        ("", None),
    ],
)
def test_systemd_is_the_launchers_own_vllm_gate_unit(text: str, expected: tuple[str, bool] | None) -> None:
    assert unit_from_cgroup(text, "prod") == expected
    assert unit_instance("fable-27b") == "vllm-gate@fable-27b.service"


def test_no_live_launcher_means_nothing_to_restore(state_dir: Path) -> None:
    assert discover(state_dir, "prod").mode is Mode.NONE
    (state_dir / "profiles" / "prod").mkdir(parents=True)
    dead = {"pid": 999_999_9, "started_at": utc_now()}
    (state_dir / "profiles" / "prod" / "launcher.json").write_text(json.dumps(dead))
    assert discover(state_dir, "prod") == Production("prod", Mode.NONE)


def test_a_live_launcher_is_recorded_to_be_started_again_the_same_way(
    state_dir: Path, tmp_path: Path
) -> None:
    profile_dir = state_dir / "profiles" / "prod"
    profile_dir.mkdir(parents=True)
    # A child stands in for the launcher, not this process: under pytest-xdist a worker's process
    # title (setproctitle) overwrites what /proc/PID/environ shows, which a launcher never does.
    waiter = [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"]
    with subprocess.Popen(waiter, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path) as child:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"  # its /proc entries are set
        seen_argv = tuple(psutil.Process(child.pid).cmdline())
        (profile_dir / "launcher.json").write_text(json.dumps({"pid": child.pid, "started_at": utc_now()}))
        status = {
            "phase": "serving",
            "engine_pid": 4321,
            "serving_fingerprint": "ab12",
            "launcher_pid": child.pid,
        }
        (profile_dir / "status.json").write_text(json.dumps(status))
        found = discover(state_dir, "prod")
    assert found.mode is Mode.DETACHED and found.launcher_pid == child.pid and found.unit is None
    assert found.argv == tuple(waiter) == seen_argv and found.cwd == str(tmp_path)
    assert found.env is not None and found.env.get("PATH") == os.environ.get("PATH")
    assert (found.engine_pid, found.fingerprint, found.phase) == (4321, "ab12", "serving")
    assert "started by hand, detached" in found.describe()
    assert Production.from_json(json.loads(json.dumps(found.to_json()))) == found
