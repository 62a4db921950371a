"""Ports for the servers tests start, safe when the suite runs in parallel (pytest-xdist).

A port from `bind(("127.0.0.1", 0))` lies in the kernel's ephemeral range, where every `connect()`
on the host also takes its local ports: between the check and the simulator's own bind, another
worker's HTTP client (or a second test's server) may take it, and the simulator fails with
`EADDRINUSE`. So ports come from below that range, where the kernel never hands one out, and each
xdist worker walks a block of its own from a random start (another checkout's suite may run on the
same host). A port is given only after a bind to it succeeded.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOWEST = 10_000
BLOCKS = 16  # xdist workers gw0..gw15 each get one; more workers share blocks round-robin
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when it cannot be read)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def worker_block(worker: str | None, low: int) -> range:
    """This worker's ports: `gwN` (PYTEST_XDIST_WORKER) → block N mod BLOCKS; no xdist → block 0."""
    size = (low - LOWEST) // BLOCKS
    index = int(worker[2:]) % BLOCKS if worker and worker[2:].isdigit() else 0
    start = LOWEST + index * size
    return range(start, start + size)


class PortWalk:
    """Hands out the ports of one block in turn, skipping any that something already holds."""

    def __init__(self, block: range, start: int) -> None:
        self.block = block
        self.next = start

    def take(self) -> int:
        for _ in range(len(self.block)):
            port = self.block[self.next % len(self.block)]
            self.next += 1
            if bindable(port):
                return port
        raise RuntimeError(f"no free port in {self.block.start}-{self.block.stop - 1}")


def bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _walk() -> PortWalk | None:
    low = ephemeral_low()
    if low - LOWEST < BLOCKS * 64:  # a host whose ephemeral range starts low: the kernel's choice
        return None
    block = worker_block(os.environ.get("PYTEST_XDIST_WORKER"), low)
    return PortWalk(block, random.randrange(len(block)))


_WALK = _walk()


def free_port() -> int:
    """A port nothing listens on, that no other worker of this suite will be given."""
    if _WALK is not None:
        return _WALK.take()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
