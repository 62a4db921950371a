"""How the launcher reads the kernel's process connector (`launcher/host/exit_events.py`): which kernels
take the exit-only filter, and what a datagram of `PROC_EVENT_*` messages yields. The datagrams are
built as include/uapi/linux/cn_proc.h and connector.h lay them out and arrive over a real datagram
socket standing in for the netlink one (subscribing needs CAP_NET_ADMIN and the host's network).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
from collections.abc import Iterator

import pytest

from launcher.host.exit_events import (
    CN_IDX_PROC,
    CN_VAL_PROC,
    KEPT,
    NLMSG_DONE,
    PROC_EVENT_EXIT,
    ExitEvents,
    _filter_supported,
)

PROC_EVENT_FORK = 0x00000001  # cn_proc.h: what a fork reports, to be skipped
KILLED = signal.SIGKILL  # a wait status: killed by SIGKILL, no core
EXITED_3 = 3 << 8  # a wait status: exit(3)


@pytest.mark.parametrize(
    ("release", "supported"),
    [
        ("6.6.0", True),
        ("6.8.0-45-generic", True),
        ("6.12.10-arch1-1", True),
        ("7.0.1", True),
        ("6.5.13-generic", False),
        ("5.15.0-1071-azure", False),
        ("4.18.0-553.el8_10.x86_64", False),
        ("6", False),
        ("linux", False),
    ],
)
def test_only_kernels_from_6_6_take_the_exit_only_filter(release: str, supported: bool) -> None:
    assert _filter_supported(release) is supported


def message(what: int, *fields: int, length: int | None = None, extra: bytes = b"") -> bytes:
    """One netlink message: nlmsghdr, cn_msg, proc_event header, then the event's fields (and `extra`
    bytes), padded to four bytes as NLMSG_ALIGN pads it, its length field not counting the padding."""
    event = struct.pack("=IIQ", what, 3, 123_456_789) + struct.pack(f"={len(fields)}I", *fields) + extra
    cn = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, 7, 0, len(event), 0) + event
    size = 16 + len(cn) if length is None else length
    body = struct.pack("=IHHII", size, NLMSG_DONE, 0, 7, 0) + cn
    return body + b"\0" * (-len(body) % 4)  # NLMSG_ALIGN


def exit_event(pid: int, status: int, tgid: int | None = None) -> bytes:
    """exit_proc_event: process_pid, process_tgid, exit_code (the wait status), exit_signal, parent's."""
    return message(PROC_EVENT_EXIT, pid, pid if tgid is None else tgid, status, signal.SIGCHLD, 1, 1)


@pytest.fixture
def connector() -> Iterator[tuple[ExitEvents, socket.socket]]:
    """An ExitEvents reading the far end of a datagram pair, as it reads its subscribed netlink socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ours.setblocking(False)
    events = ExitEvents()
    events._sock, events.unavailable = ours, None
    try:
        yield events, theirs
    finally:
        events.close()
        theirs.close()


def test_constructing_opens_nothing_and_knows_no_exit() -> None:
    events = ExitEvents()
    assert (events.unavailable, events.fileno(), events.wait_status(os.getpid(), wait_s=0)) == (
        "not opened",
        -1,
        None,
    )


def test_an_exit_gives_the_wait_status_the_kernel_announced(
    connector: tuple[ExitEvents, socket.socket],
) -> None:
    events, kernel = connector
    kernel.send(exit_event(4360, KILLED))
    status = events.wait_status(4360, wait_s=0)
    assert status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_several_messages_in_one_datagram_are_each_read(connector: tuple[ExitEvents, socket.socket]) -> None:
    events, kernel = connector
    kernel.send(
        message(PROC_EVENT_FORK, 4360, 4360, 4361, 4361)
        + exit_event(4361, EXITED_3)
        + exit_event(4362, KILLED)
    )
    assert events.wait_status(4361, wait_s=0) == EXITED_3
    assert events.wait_status(4362, wait_s=0) == KILLED
    assert events.wait_status(4360, wait_s=0) is None  # it forked; it did not exit


def test_the_next_message_starts_at_the_next_four_byte_boundary(
    connector: tuple[ExitEvents, socket.socket],
) -> None:
    events, kernel = connector
    odd = message(PROC_EVENT_FORK, 4360, 4360, 4361, 4361, extra=b"\x01")  # 73 bytes, 3 of padding
    assert struct.unpack_from("=I", odd)[0] % 4 == 1 and len(odd) % 4 == 0
    kernel.send(odd + exit_event(4361, KILLED))
    assert events.wait_status(4361, wait_s=0) == KILLED


def test_a_threads_exit_is_not_its_process_exit(connector: tuple[ExitEvents, socket.socket]) -> None:
    events, kernel = connector
    kernel.send(exit_event(4371, 0, tgid=4360))
    assert events.wait_status(4371, wait_s=0) is None
    assert events.wait_status(4360, wait_s=0) is None


def test_a_message_shorter_than_its_header_ends_the_datagram(
    connector: tuple[ExitEvents, socket.socket],
) -> None:
    events, kernel = connector
    kernel.send(message(PROC_EVENT_EXIT, 4380, 4380, KILLED, 17, 1, 1, length=8) + exit_event(4381, KILLED))
    assert events.wait_status(4381, wait_s=0) is None  # nothing after a broken length is trusted
    kernel.send(exit_event(4382, KILLED))
    assert events.wait_status(4382, wait_s=0) == KILLED  # the next datagram reads again


def test_a_truncated_exit_event_is_skipped(connector: tuple[ExitEvents, socket.socket]) -> None:
    events, kernel = connector
    truncated = message(PROC_EVENT_EXIT, 4390)  # its length covers one field of four
    kernel.send(truncated + exit_event(4391, KILLED))
    assert events.wait_status(4390, wait_s=0) is None
    assert events.wait_status(4391, wait_s=0) == KILLED


def test_a_pid_that_exits_again_reports_its_latest_status(
    connector: tuple[ExitEvents, socket.socket],
) -> None:
    """Pids are reused: the exit announced last is the one that counts."""
    events, kernel = connector
    kernel.send(exit_event(4400, EXITED_3))
    kernel.send(exit_event(4400, KILLED))
    assert events.wait_status(4400, wait_s=0) == KILLED


def test_the_oldest_exits_are_forgotten_past_the_bound(connector: tuple[ExitEvents, socket.socket]) -> None:
    """The host's other processes exit too: only the last KEPT exits are remembered."""
    events, kernel = connector
    pids = range(10_000, 10_000 + KEPT + 1024)
    for first in range(pids.start, pids.stop, 512):
        kernel.send(b"".join(exit_event(pid, KILLED) for pid in range(first, first + 512)))
        events.drain()
    assert events.wait_status(pids[-1], wait_s=0) == KILLED
    assert events.wait_status(pids[-KEPT], wait_s=0) == KILLED
    assert events.wait_status(pids[-KEPT - 1], wait_s=0) is None
    assert events.wait_status(pids[0], wait_s=0) is None


def test_a_closed_connector_knows_nothing_more(connector: tuple[ExitEvents, socket.socket]) -> None:
    events, kernel = connector
    kernel.send(exit_event(4410, KILLED))
    events.close()
    assert (events.fileno(), events.wait_status(4410, wait_s=0)) == (-1, None)
