"""The second port held by another process (issue 42): a host problem, never the change's fault.

With `park = "sleep"` or `trial = "beside"` a change starts on `park_port` while what serves keeps its
own port. A stranger listening there used to make the change look rejected by its gates (exit 3,
`rejected` in the history). Now the reload is refused before anything changes: exit 4 for the
requester naming the port and its holder, the engine that served serves on, nothing is held against
the change, and once the port is free the same file starts as it is. Real processes: the real
`launch` serving the simulator, a real socket holding the port."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.test_park import answers, events, launch, serve_parked
from tests.integration.test_trial_beside import gpu_set, serving_without_door
from tests.launcher_run import Launcher, LauncherFactory

pytestmark = pytest.mark.integration


@contextmanager
def held(port: int) -> Iterator[None]:
    """`port` listened on by this test's own process: another program, to the launcher."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        yield


CHANGED = {
    "reload",
    "parked",
    "park_skipped",
    "beside",
    "beside_skipped",
    "start",
    "rejected",
    "engine_stopped",
}


def since_serving(launcher: Launcher) -> list[str]:
    """The records after the first promotion that say something was done for a change (the greedy
    reference and the switch hook's record come in their own time)."""
    seen = events(launcher)
    return [e for e in seen[seen.index("promoted") + 1 :] if e in CHANGED | {"reload_refused"}]


def rejected_fingerprints(state: Path) -> list[str]:
    path = state / "profiles" / "svc" / "rejected.json"
    return list(json.loads(path.read_text())) if path.exists() else []


def test_a_held_park_port_refuses_the_change_and_what_serves_serves_on(
    launcher_factory: LauncherFactory,
) -> None:
    launcher, port, park_port, serving = serve_parked(launcher_factory)
    with held(park_port):
        done = launch(
            launcher, "set", "svc", "max_num_seqs=2", "--tag", "two", "--apply", "--timeout-s", "60"
        )
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"127.0.0.1:{park_port} is in use by pid {os.getpid()}" in done.stdout  # the port and its holder
    assert f"park_port {park_port}" in done.stdout
    assert since_serving(launcher) == ["reload_refused"]  # nothing parked, started or rejected
    status = launcher.status()
    assert status["phase"] == "serving" and status["engine_pid"] == serving["engine_pid"]
    assert (
        status["reload_refused"] == 1 and f":{park_port} is in use" in status["last_reload_refusal"]["reason"]
    )
    assert answers(port)
    assert rejected_fingerprints(launcher.state) == []
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
    again = launcher_factory().start()  # the port is free now: the file's change starts as it is
    assert again.proc is not None
    pid = again.proc.pid
    now = again.wait_for(
        lambda s: s.get("launcher_pid") == pid and s.get("phase") in ("serving", "serving_last_good")
    )
    assert now["phase"] == "serving" and now["serving_fingerprint"] != serving["serving_fingerprint"]
    again.signal(signal.SIGTERM)
    assert again.wait_exit() == 0


def test_a_held_park_port_refuses_a_trial_beside_production_too(
    launcher_factory: LauncherFactory, tmp_path: Path
) -> None:
    launcher = serving_without_door(launcher_factory, gpu_set(tmp_path))
    serving = launcher.status()
    park_port = int(
        next(
            line for line in (launcher.profiles / "svc.toml").read_text().splitlines() if "park_port" in line
        ).split("=")[1]
    )
    with held(park_port):
        done = launch(launcher, "set", "svc", "max_num_seqs=3", "--tag", "s3", "--apply", "--timeout-s", "60")
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"127.0.0.1:{park_port} is in use by pid {os.getpid()}" in done.stdout
    assert since_serving(launcher) == ["reload_refused"]  # not tried beside, nor stopped for
    status = launcher.status()
    assert status["phase"] == "serving" and status["engine_pid"] == serving["engine_pid"]
    assert rejected_fingerprints(launcher.state) == []
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
