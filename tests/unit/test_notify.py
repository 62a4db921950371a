"""sd_notify against a real datagram socket set as NOTIFY_SOCKET (a path, and an abstract @name)."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.host.notify import Notifier, watchdog_interval_s


@pytest.fixture(params=["path", "abstract"])
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    """What systemd holds: a bound AF_UNIX datagram socket, and the NOTIFY_SOCKET value naming it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if request.param == "path":
        name = str(tmp_path / "notify")
        sock.bind(name)
    else:
        name = f"@vllm-gate-test-{uuid.uuid4().hex}"
        sock.bind("\0" + name[1:])
    sock.settimeout(5)
    try:
        yield name, sock
    finally:
        sock.close()


def received(sock: socket.socket, count: int) -> list[str]:
    return [sock.recv(4096).decode() for _ in range(count)]


def test_messages_arrive_in_order_as_systemd_reads_them(manager: tuple[str, socket.socket]) -> None:
    name, sock = manager
    notifier = Notifier.from_env({"NOTIFY_SOCKET": name})
    assert notifier.enabled

    assert notifier.status("loading weights")
    assert notifier.extend_timeout(90)
    assert notifier.ready("serving prod (candidate 1a2b)")
    assert notifier.watchdog()
    assert notifier.reloading("reloading prod")
    assert notifier.stopping("stopping: SIGTERM")

    got = received(sock, 6)
    assert got[:4] == [
        "STATUS=loading weights",
        "EXTEND_TIMEOUT_USEC=90000000",
        "READY=1\nSTATUS=serving prod (candidate 1a2b)",
        "WATCHDOG=1",
    ]
    reload_lines = got[4].split("\n")
    assert reload_lines[0] == "RELOADING=1" and reload_lines[2] == "STATUS=reloading prod"
    stamp = int(reload_lines[1].removeprefix("MONOTONIC_USEC="))
    now_usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert 0 < now_usec - stamp < 10_000_000
    assert got[5] == "STOPPING=1\nSTATUS=stopping: SIGTERM"


def test_a_status_is_kept_to_one_line(manager: tuple[str, socket.socket]) -> None:
    name, sock = manager
    Notifier(name).status("gate failed:\ntool_call")
    assert received(sock, 1) == ["STATUS=gate failed: tool_call"]


def test_without_notify_socket_every_call_is_a_no_op() -> None:
    notifier = Notifier.from_env({})
    assert not notifier.enabled
    assert not notifier.ready("x") and not notifier.watchdog()


def test_a_missing_socket_is_reported_not_raised(tmp_path: Path) -> None:
    assert Notifier(str(tmp_path / "gone")).ready() is False


def test_watchdog_interval_comes_from_watchdog_usec_for_this_pid() -> None:
    assert watchdog_interval_s({"WATCHDOG_USEC": "120000000"}) == 120.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}) == 30.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "soon"}) is None
    assert watchdog_interval_s({}) is None
