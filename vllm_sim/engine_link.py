"""The API server's end of the pipe to `VLLM::EngineCore`: step grants, utility calls, lifecycle.

Messages are small tuples (`wire.py`: the step messages packed, the rest pickled), in order:

    API → engine   ("step", seq, generated, finished, decoding)   run this step
                   ("call", id, method, args)                      a utility call (sleep, wake_up, ...)
                   ("shutdown", in_flight), ("crash",), ("first_request",)
    engine → API   ("stepped", seq)                                the step ran
                   ("result", id, ok, value)                       a utility call's answer, or why it failed
                   ("ready", pid), ("failed",), ("stopped",)

As in vLLM's MPClient a utility call that fails in the engine raises, in the API server,
`Call to METHOD method failed: MESSAGE` (0.26.0 `v1/engine/core.py:1549`, `core_client.py:765`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from vllm_sim import wire
from vllm_sim.jobs import StepWork


class EngineCallFailed(Exception):
    """A utility call the engine answered with a failure; str() is vLLM's message."""


class EngineDead(Exception):
    """vLLM's EngineDeadError, for what was waiting on the engine when it died."""

    def __init__(self) -> None:
        super().__init__("EngineCore encountered an issue. See stack trace (above) for the root cause.")


class EngineLink:
    def __init__(self, conn: Connection, on_lifecycle: Callable[[tuple[Any, ...]], None]) -> None:
        self.conn = conn
        self.on_lifecycle = on_lifecycle  # ready, failed, stopped
        self._steps: dict[int, asyncio.Future[None]] = {}
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self.conn.fileno(), self._on_readable)

    def send(self, message: tuple[object, ...]) -> None:
        if not self.closed:
            with contextlib.suppress(OSError):
                self.conn.send_bytes(wire.encode(message))

    def step(self, work: StepWork) -> asyncio.Future[None]:
        """Ask the engine core to run a step; the future completes when it has."""
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        self._steps[work.seq] = future
        self.send(("step", work.seq, work.generated, work.finished, work.decoding))
        return future

    async def call(self, method: str, *args: object) -> Any:
        """A utility call, answered when the engine core gets to it (never, while it is stopped)."""
        assert self._loop is not None
        call_id = next(self._ids)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._calls[call_id] = future
        self.send(("call", call_id, method, args))
        try:
            return await future
        finally:
            self._calls.pop(call_id, None)

    def _on_readable(self) -> None:
        try:
            while True:
                self._dispatch(wire.decode(self.conn.recv_bytes()))
                if not self.conn.poll(0):
                    return
        except (EOFError, OSError):
            self.close()

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "stepped":
            future = self._steps.pop(message[1], None)
            if future is not None and not future.done():
                future.set_result(None)
        elif kind == "result":
            _, call_id, ok, value = message
            call = self._calls.get(call_id)
            if call is not None and not call.done():
                call.set_result(value) if ok else call.set_exception(EngineCallFailed(str(value)))
        else:
            self.on_lifecycle(message)

    def fail_calls(self, error: Exception) -> None:
        """The engine died: every utility call waiting on it fails (vLLM: EngineDeadError)."""
        for future in self._calls.values():
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        """The engine's end is gone: nothing more will come (pending steps and calls stay pending,
        as vLLM's do until the server shuts down)."""
        if self.closed:
            return
        self.closed = True
        if self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self.conn.fileno())
