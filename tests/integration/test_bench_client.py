"""The streaming client against a hand-written loopback server: stamps, framing, errors, keep-alive."""

from __future__ import annotations

import asyncio
import statistics
import time
from itertools import pairwise

import pytest

from launcher.bench.client import Client
from launcher.bench.exchange import Phase, Tag
from launcher.bench.record import build_record

pytestmark = pytest.mark.integration
TAG = Tag(Phase.TIMED, "t")
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n'
LAST = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}\n\ndata: [DONE]\n\n'


class Server:
    """Answers each request on a connection; `close_after_first` hangs up once the first reply is sent."""

    def __init__(self, *, status: int = 200, close_after_first: bool = False, gap_s: float = 0.02) -> None:
        self.status, self.close_after_first, self.gap_s = status, close_after_first, gap_s
        self.writes: list[float] = []
        self.closed = asyncio.Event()
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                self.requests += 1
                await self.reply(writer)
                if self.close_after_first:
                    writer.close()
                    self.closed.set()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def reply(self, writer: asyncio.StreamWriter) -> None:
        if self.status != 200:
            body = b'{"error": {"message": "too long", "code": 400}}'
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for payload in (EVENT, EVENT, EVENT, LAST + USAGE):
            await asyncio.sleep(self.gap_s)
            writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            await writer.drain()
            self.writes.append(time.monotonic())
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def serve(server: Server) -> tuple[asyncio.base_events.Server, str]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    return listener, f"http://127.0.0.1:{port}"


def test_chunks_are_stamped_on_arrival_and_parsed_after() -> None:
    """Each event gets its own stamp, taken after the server wrote it; how close after (within 2 ms
    on loopback, ITL error under 1 ms) is bench/bench_accuracy.py's figure, not this test's."""

    async def go() -> tuple[list[float], object]:
        server = Server()
        listener, url = await serve(server)
        async with listener, Client(url) as client:
            exchange = await client.stream("/v1/chat/completions", b"{}", TAG, "r1")
        return server.writes, exchange

    writes, exchange = asyncio.run(go())
    record = build_record(exchange)  # type: ignore[arg-type]
    assert record.ok and record.output_tokens == 4 and record.content == "xxx"
    assert len(record.event_times) == 4 == len(writes)
    assert all(stamp >= write for stamp, write in zip(record.event_times, writes, strict=True))  # same clock
    assert list(record.event_times) == sorted(set(record.event_times))  # one stamp per chunk, in order
    assert record.itl_median_s == pytest.approx(
        statistics.median(b - a for a, b in pairwise(record.event_times))
    )


def test_http_errors_are_values_with_the_servers_message() -> None:
    async def go() -> object:
        listener, url = await serve(Server(status=400))
        async with listener, Client(url) as client:
            return await client.stream("/v1/chat/completions", b"{}", TAG, "r2")

    exchange = asyncio.run(go())
    assert exchange.status == 400 and exchange.error == "HTTP 400: too long"  # type: ignore[attr-defined]


def test_a_keep_alive_connection_closed_by_the_server_is_replaced() -> None:
    async def go() -> tuple[object, object, int]:
        server = Server(close_after_first=True, gap_s=0.001)
        listener, url = await serve(server)
        async with listener, Client(url) as client:
            first = await client.stream("/v1/chat/completions", b"{}", TAG, "a")
            await asyncio.wait_for(server.closed.wait(), 5)  # the idle connection is gone (uvicorn: 5 s)
            second = await client.stream("/v1/chat/completions", b"{}", TAG, "b")
        return first, second, server.requests

    first, second, served = asyncio.run(go())
    assert build_record(first).ok and build_record(second).ok and served == 2  # type: ignore[arg-type]


def test_nothing_listening_is_an_error_value() -> None:
    async def go() -> object:
        listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        listener.close()
        await listener.wait_closed()
        async with Client(f"http://127.0.0.1:{port}") as client:
            return await client.stream("/v1/chat/completions", b"{}", TAG, "c")

    exchange = asyncio.run(go())
    assert exchange.status == 0 and "connect" in (exchange.error or "")  # type: ignore[attr-defined]
