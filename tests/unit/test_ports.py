"""The tests' port helper: parallel workers never share a port, and none comes from the ephemeral range."""

from __future__ import annotations

import socket

from tests.ports import BLOCKS, LOWEST, PortWalk, ephemeral_low, free_port, worker_block


def test_each_worker_has_its_own_block_below_the_ephemeral_range() -> None:
    low = ephemeral_low()
    blocks = [worker_block(f"gw{n}", low) for n in range(BLOCKS)]
    ports = [port for block in blocks for port in block]
    assert len(ports) == len(set(ports)) and min(ports) >= LOWEST and max(ports) < low
    assert worker_block(None, low) == blocks[0] and worker_block(f"gw{BLOCKS + 3}", low) == blocks[3]


def test_a_held_port_is_skipped_and_the_walk_goes_on() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        walk = PortWalk(range(taken, taken + 50), 0)
        first = walk.take()
        assert first != taken and walk.take() not in (taken, first)


def test_a_given_port_can_be_bound() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))
