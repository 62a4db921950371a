"""How a process that is not our child ended, from the kernel's process connector.

vLLM's engine core and workers are children of its API server, not of the launcher, so only the
API server can wait for them. While one is a zombie its wait status is in /proc/PID/stat (field 52),
but the API server reaps it within moments, and a busy host makes the launcher lose that race (the
death was then named "status not readable: its parent collected it first"). Linux also announces
every exit, with the same wait status, on the netlink process connector (`PROC_EVENT_EXIT`,
include/uapi/linux/cn_proc.h) before the parent can reap it. Listening needs CAP_NET_ADMIN and the
host's network namespace; where either is missing, `open()` says why and the zombie read is all.

Since Linux 6.6 a listener can ask for exit events only; older kernels get every event, which is
still cheap to drain (one datagram each).
"""

from __future__ import annotations

import contextlib
import platform
import select
import socket
import struct
from collections import OrderedDict

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_EVENT_EXIT = 0x80000000
NLMSG_DONE = 3
_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_CN_MSG = struct.Struct("=IIIIHH")  # idx, val, seq, ack, len, flags
_EVENT_HEAD = struct.Struct("=IIQ")  # what, cpu, timestamp_ns
_EXIT = struct.Struct("=IIII")  # process_pid, process_tgid, exit_code, exit_signal
KEPT = 4096  # exits remembered (a bounded map: the host's other processes exit too)


def _filter_supported(release: str | None = None) -> bool:
    """Event filtering came with Linux 6.6 (the 8-byte `proc_input`); older kernels ignore it."""
    parts = (release or platform.release()).split(".")
    try:
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (6, 6)
    except (ValueError, IndexError):
        return False


class ExitEvents:
    """Constructing opens nothing; `open()` subscribes, `close()` ends it."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self.unavailable: str | None = "not opened"
        self._exits: OrderedDict[int, int] = OrderedDict()

    def open(self) -> bool:
        try:
            sock = socket.socket(
                socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_CONNECTOR
            )
        except (OSError, AttributeError) as err:
            self.unavailable = f"no process connector: {err}"
            return False
        try:
            sock.bind((0, CN_IDX_PROC))
            op = (
                struct.pack("=II", PROC_CN_MCAST_LISTEN, PROC_EVENT_EXIT)
                if _filter_supported()
                else struct.pack("=I", PROC_CN_MCAST_LISTEN)
            )
            body = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(op), 0) + op
            sock.send(_NLMSG.pack(_NLMSG.size + len(body), NLMSG_DONE, 0, 0, 0) + body)
            sock.setblocking(False)
        except OSError as err:
            sock.close()
            self.unavailable = f"process connector refused: {err.strerror or err} (needs CAP_NET_ADMIN)"
            return False
        self._sock = sock
        self.unavailable = None
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    def drain(self) -> None:
        """Read every event waiting (never blocks)."""
        while self._sock is not None:
            try:
                data = self._sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:  # ENOBUFS: the socket overflowed and events were lost; go on
                continue
            self._parse(data)

    def wait_status(self, pid: int, wait_s: float = 0.2) -> int | None:
        """The wait status the kernel announced for `pid`'s exit (waiting up to `wait_s` for it)."""
        if self._sock is None:
            return None
        self.drain()
        if pid not in self._exits:
            with contextlib.suppress(OSError, ValueError):
                select.select([self._sock], [], [], wait_s)
            self.drain()
        return self._exits.get(pid)

    def _parse(self, data: bytes) -> None:
        offset = 0
        while offset + _NLMSG.size <= len(data):
            length = _NLMSG.unpack_from(data, offset)[0]
            if length < _NLMSG.size:
                return
            event_at = offset + _NLMSG.size + _CN_MSG.size
            if event_at + _EVENT_HEAD.size + _EXIT.size <= offset + length:
                what = _EVENT_HEAD.unpack_from(data, event_at)[0]
                if what == PROC_EVENT_EXIT:
                    pid, tgid, code, _ = _EXIT.unpack_from(data, event_at + _EVENT_HEAD.size)
                    if pid == tgid:  # the process itself, not one of its threads
                        self._remember(tgid, code)
            offset += (length + 3) & ~3

    def _remember(self, pid: int, status: int) -> None:
        self._exits[pid] = status
        self._exits.move_to_end(pid)
        while len(self._exits) > KEPT:
            self._exits.popitem(last=False)
