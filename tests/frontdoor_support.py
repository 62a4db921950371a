"""Real processes for the front door's integration tests: `launch frontdoor` (which execs Caddy)
and tiny upstreams (tests/frontdoor_upstream.py), each started with a deadline on its readiness and
ended by its pid; and a raw client that sends a whole request before anything answers it."""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.frontdoor.admin import FrontdoorAdmin
from launcher.frontdoor.door import Door, load_door
from launcher.state.store import StateStore
from tests.conftest import SHIPPED_PROFILES
from tests.launcher_run import Launcher
from tests.simserver import HANG_S
from tests.stream_clients import StreamClients

LAUNCH = Path(sys.executable).with_name("launch")
UPSTREAM = Path(__file__).with_name("frontdoor_upstream.py")


@dataclass
class Upstream:
    name: str
    port: int
    proc: subprocess.Popen[str]

    @property
    def dial(self) -> str:
        return f"127.0.0.1:{self.port}"

    def seen(self) -> list[str]:
        return list(_call("GET", self.port, "/control/seen")["seen"])

    def release(self) -> None:
        """Let its held SSE stream go on (asked directly, never through the door)."""
        _call("POST", self.port, "/control/release")


@dataclass
class RunningDoor:
    proc: subprocess.Popen[bytes]
    door: Door
    admin: FrontdoorAdmin
    log: Path
    profiles: Path
    state: Path

    @property
    def port(self) -> int:
        assert self.door.settings.port is not None
        return self.door.settings.port


@contextlib.contextmanager
def scratch() -> Iterator[tuple[Path, Path]]:
    """(profiles, state): a copy of the shipped profiles, and a state dir with a short path (the
    door's admin socket is made there; a unix socket path holds 107 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="vg-fd-"))
    shutil.copytree(SHIPPED_PROFILES, root / "p")
    try:
        yield root / "p", root / "s"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def write_profile(profiles: Path, name: str, engine_port: int, park_port: int, **door: Any) -> None:
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in door.items())
    (profiles / f"{name}.toml").write_text(
        f'extends = "demo"\n[engine]\nport = {engine_port}\n'
        f'[supervisor]\npark = "sleep"\npark_port = {park_port}\n[frontdoor]\n{lines}',
        encoding="utf-8",
    )


def launch(profiles: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=HANG_S, check=False)


@contextlib.contextmanager
def running_door(profiles: Path, state: Path, profile: str) -> Iterator[RunningDoor]:
    """`launch frontdoor --profile NAME` as its own process, ready once its admin API answers with
    our proxy; SIGTERM at the end (SIGKILL if it does not stop)."""
    log = state.parent / f"{profile}-door.log"
    argv = [
        str(LAUNCH),
        "--profiles-dir",
        str(profiles),
        "--state-dir",
        str(state),
        "frontdoor",
        "--profile",
        profile,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        door = load_door(profiles, profile, StateStore(state))
        running = RunningDoor(proc, door, FrontdoorAdmin(door, timeout_s=HANG_S), log, profiles, state)
        _wait_alive(running)
        yield running
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[Any]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(HANG_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(HANG_S)


def _wait_alive(running: RunningDoor) -> None:
    quick = FrontdoorAdmin(running.door, timeout_s=5)
    deadline = time.monotonic() + HANG_S
    while not quick.alive():
        if running.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(
                f"the front door did not come up:\n{running.log.read_text(errors='replace')}"
            )
        time.sleep(0.05)


@contextlib.contextmanager
def upstreams() -> Iterator[list[Upstream]]:
    started: list[Upstream] = []
    try:
        yield started
    finally:
        for upstream in started:
            if upstream.proc.poll() is None:
                upstream.proc.kill()
            upstream.proc.wait(HANG_S)
            if upstream.proc.stdout is not None:
                upstream.proc.stdout.close()


def start_upstream(started: list[Upstream], name: str, port: int) -> Upstream:
    proc = subprocess.Popen(
        [sys.executable, str(UPSTREAM), name, str(port)], stdout=subprocess.PIPE, text=True
    )
    upstream = Upstream(name, port, proc)
    started.append(upstream)
    assert proc.stdout is not None and proc.stdout.readline() == f"ready {port}\n"
    return upstream


def send(port: int, method: str, path: str, body: bytes = b"") -> socket.socket:
    """A whole request written to the door (a raw socket): what answers it is read later (`answer`)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_S)
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")  # fmt: skip
    sock.sendall(head.encode("ascii") + body)
    return sock


def answer(sock: socket.socket, method: str = "POST") -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of the response on a socket `send` wrote to."""
    response = http.client.HTTPResponse(sock, method=method)
    try:
        response.begin()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        response.close()
        sock.close()


def ask(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    return answer(send(port, method, path, body), method)


def _call(method: str, port: int, path: str) -> Any:
    status, _, body = ask(port, method, path)
    assert status == 200, (status, body)
    return json.loads(body)


class FileOpens:
    """Every open of one file, as the kernel reports it (inotify IN_OPEN): Caddy opens the door's
    target file at each attempt to forward a request, so two opens after a request was sent mean it
    was tried again: held at the door. Watch after the last `point_at` (a re-point replaces the file,
    and the watch stays on the old one)."""

    IN_OPEN = 0x20
    _EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (inotify(7)); the name follows

    def __init__(self, path: Path) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        assert self._libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_OPEN) >= 0
        self.count = 0

    def wait_for(self, opens: int) -> None:
        """Read the events as they come (identical events not yet read are merged into one)."""
        deadline = time.monotonic() + HANG_S
        while self.count < opens:
            left = deadline - time.monotonic()
            assert left > 0, f"the file was opened {self.count} time(s), not {opens}"
            if select.select([self.fd], [], [], left)[0]:
                data = os.read(self.fd, 65536)
                offset = 0
                while offset < len(data):
                    offset += self._EVENT.size + self._EVENT.unpack_from(data, offset)[3]
                    self.count += 1

    def close(self) -> None:
        os.close(self.fd)


def socket_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


@contextlib.contextmanager
def served_to_clients(launcher: Launcher) -> Iterator[tuple[RunningDoor, StreamClients]]:
    """The launcher's profile served, its front door up, and eight clients streaming through it
    (traffic flowing before the caller's change); the launcher is stopped with SIGTERM after."""
    launcher.start()
    launcher.wait_phase("serving")
    try:
        with (
            running_door(launcher.profiles, launcher.state, launcher.profile) as door,
            StreamClients(door.door.url, count=8) as clients,
        ):
            clients.each_finished(2)
            yield door, clients
    finally:
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit()


def assert_clients_saw_nothing(clients: StreamClients) -> None:
    """After a change: traffic flows again, and no client saw a failed request or a cut stream."""
    clients.each_finished(2)
    assert clients.failed() == [], [o.error for o in clients.failed()][:3]
    assert clients.cut() == [], clients.cut()[:3]
    assert len(clients.outcomes) >= 32
