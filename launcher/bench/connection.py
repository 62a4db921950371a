"""One keep-alive HTTP/1.1 connection that timestamps every network chunk in `data_received`.

`data_received` is the earliest moment Python sees bytes from the socket; the timestamp is taken
before anything else happens there. Framing (finding where the response ends) comes after the
stamp and costs a few microseconds; JSON is never touched here.
"""

from __future__ import annotations

import asyncio
import socket
import time

from launcher.bench.framing import FramingError, ResponseFramer


class StreamConnection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.chunks: list[tuple[float, bytes]] = []
        self.framer = ResponseFramer()
        self.error: str | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # One small write per request and streamed replies: Nagle would only add delay.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        arrived = time.monotonic()
        try:
            body = self.framer.feed(data)
        except FramingError as err:
            self.error = str(err)
            self._finish()
            return
        if body:
            self.chunks.append((arrived, body))
        if self.framer.complete:
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.framer.connection_closed()
        if not self.framer.complete and self.error is None:
            self.error = f"connection closed mid-response ({exc or 'EOF'})"
        self._finish()

    def _finish(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def send(self, request: bytes) -> tuple[float, asyncio.Future[None]]:
        """Reset for a new exchange, write the request in one piece; (send time, done future)."""
        assert self.transport is not None
        self.chunks = []
        self.framer = ResponseFramer()
        self.error = None
        self._waiter = asyncio.get_running_loop().create_future()
        sent = time.monotonic()
        self.transport.write(request)
        return sent, self._waiter

    @property
    def reusable(self) -> bool:
        return not self.closed and self.error is None and self.framer.complete and self.framer.keep_alive

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
