"""The simulator's HTTP server (vllm_sim/http_server.py, http_messages.py) on a real loopback socket:
what a request carries, FastAPI's 404 and 405, the body bound, malformed requests, keep-alive,
chunked streams written as they are made, and a client that leaves cancelling its handler.

The server runs in the test's own event loop; the client frames its requests and reads the answers
through h11's client side. Waits are on events, with deadlines only a hang reaches."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import h11

from vllm_sim.http_messages import Reply, Request, Response, Router, StreamResponse, json_response
from vllm_sim.http_server import HttpServer, Limits

HANG_S = 60.0  # only a hang reaches it (docs/decisions/0013)
LIMITS = Limits(keep_alive_s=HANG_S, max_body_bytes=1024, max_event_bytes=16 * 1024)
T = TypeVar("T")


@dataclass
class Served:
    port: int
    server: HttpServer
    logged: list[str] = field(default_factory=list)
    accessed: list[tuple[str, int]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def serving(
    app: Callable[[Request], Awaitable[Reply]], limits: Limits = LIMITS
) -> AsyncIterator[Served]:
    """`app` served on a loopback port of this event loop; closed (and waited for) at the end."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    logged: list[str] = []
    accessed: list[tuple[str, int]] = []

    async def handler(request: Request) -> Reply:
        return await app(request)

    server = HttpServer(
        handler, limits, logged.append, lambda r, status: accessed.append((r.path_qs, status))
    )
    await server.start(sock)
    try:
        yield Served(sock.getsockname()[1], server, logged, accessed)
    finally:
        await server.close(grace_s=HANG_S)
        sock.close()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    chunks: list[bytes]

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


def framed(
    conn: h11.Connection, method: str, target: str, body: bytes, headers: dict[str, str], end: bool = True
) -> bytes:
    """One request as `conn` (h11's client side) writes it; with `end=False` only its head."""
    fields = [("host", "test"), *((k.replace("_", "-"), v) for k, v in headers.items())]
    if "transfer_encoding" not in headers and "content_length" not in headers:
        fields.append(("content-length", str(len(body))))
    data = conn.send(h11.Request(method=method, target=target, headers=fields)) or b""
    if not end:
        return data
    if body:
        data += conn.send(h11.Data(data=body)) or b""
    return data + (conn.send(h11.EndOfMessage()) or b"")


class Client:
    """One connection; its requests framed and its answers read through h11's client side."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    async def to(cls, port: int) -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(
        self,
        method: str,
        target: str,
        body: bytes = b"",
        write: bool = True,
        end: bool = True,
        **headers: str,
    ) -> None:
        """One request (its head only, `end=False`); `write=False` tells h11 of one already sent."""
        data = framed(self.conn, method, target, body, headers, end)
        if write:
            self.writer.write(data)

    def send_body(self, *parts: bytes) -> None:
        for part in parts:
            self.writer.write(self.conn.send(h11.Data(data=part)) or b"")

    async def event(self) -> h11.Event:
        while (event := self.conn.next_event()) is h11.NEED_DATA:
            self.conn.receive_data(await asyncio.wait_for(self.reader.read(65536), HANG_S))
        assert isinstance(event, h11.Event)
        return event

    async def head(self) -> Answer:
        while isinstance(event := await self.event(), h11.InformationalResponse):
            pass
        assert isinstance(event, h11.Response), event
        return Answer(event.status_code, {k.decode(): v.decode() for k, v in event.headers}, [])

    async def answer(self) -> Answer:
        answer = await self.head()
        while not isinstance(event := await self.event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data)
            answer.chunks.append(bytes(event.data))
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        return answer

    async def ask(self, method: str, target: str, body: bytes = b"", **headers: str) -> Answer:
        self.send(method, target, body, write=True, end=True, **headers)  # named: no header takes their place
        return await self.answer()

    async def closed_by_server(self) -> bool:
        """The server closed this connection: EOF (or a reset) before anything else arrives."""
        try:
            rest = await asyncio.wait_for(self.reader.read(65536), HANG_S)
        except ConnectionResetError:
            return True
        return rest == b""


def run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(main())


async def echo(request: Request) -> Response:
    return json_response(
        {
            "method": request.method,
            "path": request.path,
            "path_qs": request.path_qs,
            "tags": request.query.getall("tags"),
            "level": request.query.get("level", "1"),
            "auth": request.headers.get("AUTHORIZATION"),
            "version": request.http_version,
            "peer": list(request.peer),
            "length": request.content_length,
            "json": request.json() if request.body else None,
        }
    )


def test_a_request_carries_its_method_path_query_headers_body_peer_and_version() -> None:
    target = "/v1/a%20b?tags=weights&tags=kv_cache&level=2&level=3"
    body = json.dumps({"model": "m", "n": 1}).encode()

    async def main() -> tuple[Answer, int, Served]:
        async with serving(echo) as served:
            client = await Client.to(served.port)
            answer = await client.ask("POST", target, body, authorization="Bearer k")
            return answer, client.writer.get_extra_info("sockname")[1], served

    answer, local_port, served = run(main)
    assert json.loads(answer.body) == {
        "method": "POST",
        "path": "/v1/a b",
        "path_qs": target,
        "tags": ["weights", "kv_cache"],
        "level": "3",  # Starlette's QueryParams.get: the last one
        "auth": "Bearer k",
        "version": "1.1",
        "peer": ["127.0.0.1", local_port],
        "length": len(body),
        "json": {"model": "m", "n": 1},
    }
    assert list(answer.headers) == ["date", "server", "content-length", "content-type"]
    assert answer.headers["server"] == "uvicorn" and answer.headers["content-type"] == "application/json"
    assert answer.headers["content-length"] == str(len(answer.body))
    assert served.accessed == [(target, 200)]


def test_fastapis_404_and_405_and_a_head_gets_no_body() -> None:
    router = Router()
    router.add("GET", "/ping", echo)
    router.add("POST", "/ping", echo)
    router.add("POST", "/v1/chat/completions", echo)

    async def main() -> list[Answer]:
        async with serving(router.dispatch) as served:
            client = await Client.to(served.port)
            asked = [("GET", "/nope"), ("GET", "/v1/chat/completions"), ("PUT", "/ping"), ("HEAD", "/ping")]
            return [await client.ask(method, path) for method, path in [*asked, ("POST", "/ping")]]

    missing, wrong_method, first_route, head, served = run(main)
    assert (missing.status, json.loads(missing.body)) == (404, {"detail": "Not Found"})
    assert (wrong_method.status, json.loads(wrong_method.body)) == (405, {"detail": "Method Not Allowed"})
    assert wrong_method.headers["allow"] == "POST"
    assert first_route.headers["allow"] == "GET"  # the first route registered at the path
    assert head.status == 405 and head.body == b"" and head.headers["content-length"] == "31"
    assert served.status == 200 and json.loads(served.body)["method"] == "POST"


def test_a_body_over_the_limit_is_refused_413_and_the_connection_closed() -> None:
    called: list[Request] = []

    async def app(request: Request) -> Response:
        called.append(request)
        return Response()

    async def main() -> list[tuple[Answer, bool]]:
        async with serving(app) as served:
            declared = await Client.to(served.port)
            declared.send("POST", "/x", end=False, content_length="1025")  # and a part of the body
            declared.send_body(b"x" * 100)
            chunked = await Client.to(served.port)
            chunked.send("POST", "/x", end=False, transfer_encoding="chunked")
            chunked.send_body(b"y" * 1000, b"y" * 100)
            return [(await c.answer(), await c.closed_by_server()) for c in (declared, chunked)]

    for answer, closed in run(main):
        assert answer.status == 413 and json.loads(answer.body) == {"detail": "Request Entity Too Large"}
        assert answer.headers["connection"] == "close" and closed
    assert called == []


def test_a_malformed_request_is_answered_400_as_uvicorn_does_and_the_connection_closed() -> None:
    called: list[Request] = []

    async def app(request: Request) -> Response:
        called.append(request)
        return Response()

    async def main() -> tuple[bytes, list[str]]:
        async with serving(app) as served:
            reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
            raw = await asyncio.wait_for(reader.read(), HANG_S)  # all of it, up to the server's close
            writer.close()
            return raw, served.logged

    raw, logged = run(main)
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *headers = head.split(b"\r\n")
    assert status == b"HTTP/1.1 400 Bad Request"
    names = [h.split(b":")[0].lower() for h in headers]
    assert names == [b"date", b"server", b"content-type", b"content-length", b"connection"]
    assert b"connection: close" in headers and b"content-length: 30" in headers
    assert body == b"Invalid HTTP request received."
    assert logged == ["WARNING:  Invalid HTTP request received."] and called == []


def test_an_unfinished_request_head_over_h11s_bound_is_malformed() -> None:
    """h11 bounds what it holds of an event it cannot finish yet (a whole head that came at once
    is parsed whatever its size), as vLLM's `--h11-max-incomplete-event-size` does."""

    async def main() -> tuple[bytes, bool]:
        async with serving(echo) as served:
            client = await Client.to(served.port)
            client.writer.write(b"GET /x HTTP/1.1\r\nhost: t\r\nhuge: " + b"h" * LIMITS.max_event_bytes)
            answer = await asyncio.wait_for(client.reader.readuntil(b"received."), HANG_S)
            return answer, await client.closed_by_server()

    answer, closed = run(main)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and closed


def test_keep_alive_serves_request_after_request_on_one_connection_then_closes_it_when_idle() -> None:
    async def main() -> tuple[list[Answer], bool]:
        # 1 s idle: a busy host kept this client more than 50 ms between two of its requests, and
        # the server rightly closed the connection under it (docs/decisions/0013: out of load's reach)
        async with serving(echo, Limits(1.0, 1024, 16 * 1024)) as served:
            client = await Client.to(served.port)
            answers = [await client.ask("GET", f"/n?level={i}") for i in range(3)]
            return answers, await client.closed_by_server()  # once idle past keep_alive_s

    answers, closed = run(main)
    assert [json.loads(a.body)["level"] for a in answers] == ["0", "1", "2"]
    assert len({json.loads(a.body)["peer"][1] for a in answers}) == 1  # one connection
    assert closed


def test_connection_close_is_honoured_and_pipelined_requests_answered_in_order() -> None:
    async def main() -> tuple[list[Answer], bool]:
        async with serving(echo) as served:
            client = await Client.to(served.port)
            client.send("GET", "/a")
            client.writer.write(framed(h11.Connection(h11.CLIENT), "GET", "/b", b"", {"connection": "close"}))
            first = await client.answer()
            client.send("GET", "/b", write=False, connection="close")  # already on the wire
            second = await client.answer()
            return [first, second], await client.closed_by_server()

    (first, second), closed = run(main)
    assert json.loads(first.body)["path"] == "/a" and json.loads(second.body)["path"] == "/b"
    assert "connection" not in first.headers
    assert second.headers["connection"] == "close" and closed


def test_a_stream_is_chunked_and_each_write_leaves_before_the_next_is_made() -> None:
    """The client reads each chunk while the handler waits for the test to let it write the next."""
    go_on = [asyncio.Event() for _ in range(2)]

    async def app(request: Request) -> StreamResponse:
        stream = StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await stream.start(request)
        for i, event in enumerate(go_on):
            await stream.write(f"data: {i}\n\n".encode())
            await event.wait()
        await stream.write(b"data: [DONE]\n\n")
        return stream  # not ended: the server ends it

    async def main() -> tuple[Answer, list[bytes]]:
        async with serving(app) as served:
            client = await Client.to(served.port)
            client.send("POST", "/v1/chat/completions", b"{}")
            head = await client.head()
            seen = []
            for event in go_on:
                data = await client.event()
                assert isinstance(data, h11.Data)
                seen.append(bytes(data.data))
                event.set()
            while not isinstance(last := await client.event(), h11.EndOfMessage):
                assert isinstance(last, h11.Data)
                seen.append(bytes(last.data))
            return head, seen

    head, seen = run(main)
    assert head.headers["transfer-encoding"] == "chunked" and "content-length" not in head.headers
    assert head.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert seen == [b"data: 0\n\n", b"data: 1\n\n", b"data: [DONE]\n\n"]


def test_a_client_that_leaves_cancels_its_handler() -> None:
    started, ended = asyncio.Event(), asyncio.Event()
    outcome: list[str] = []

    async def app(request: Request) -> Response:
        started.set()
        try:
            await asyncio.Event().wait()  # an answer that never comes
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        finally:
            ended.set()
        return Response()

    async def main() -> list[tuple[str, int]]:
        async with serving(app) as served:
            client = await Client.to(served.port)
            client.send("POST", "/v1/completions", b"{}")
            await asyncio.wait_for(started.wait(), HANG_S)
            client.writer.close()
            await asyncio.wait_for(ended.wait(), HANG_S)
            return served.accessed

    assert run(main) == [] and outcome == ["cancelled"]


def test_a_handlers_exception_is_logged_with_its_traceback_and_answered_500() -> None:
    async def app(request: Request) -> Response:
        raise RuntimeError("a bug in a handler")

    async def main() -> tuple[Answer, list[str]]:
        async with serving(app) as served:
            return await (await Client.to(served.port)).ask("GET", "/x"), served.logged

    answer, logged = run(main)
    assert (answer.status, answer.body) == (500, b"Internal Server Error")
    assert logged[0].startswith("ERROR:    Exception in ASGI application\nTraceback")
    assert logged[0].endswith("RuntimeError: a bug in a handler")


def test_expect_100_continue_is_answered_before_the_body_is_sent() -> None:
    async def main() -> tuple[h11.Event, Answer]:
        async with serving(echo) as served:
            client = await Client.to(served.port)
            client.send("POST", "/x", end=False, content_length="2", expect="100-continue")
            interim = await client.event()
            client.send_body(b"{}")
            client.writer.write(client.conn.send(h11.EndOfMessage()) or b"")
            return interim, await client.answer()

    interim, answer = run(main)
    assert isinstance(interim, h11.InformationalResponse) and interim.status_code == 100
    assert answer.status == 200 and json.loads(answer.body)["json"] == {}


def test_closing_the_server_ends_idle_connections_and_lets_a_running_request_finish() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def app(request: Request) -> Response:
        started.set()
        await release.wait()
        return Response(body=b"done")

    async def main() -> tuple[bool, Answer, bool]:
        async with serving(app) as served:
            idle = await Client.to(served.port)
            busy = await Client.to(served.port)
            busy.send("GET", "/slow")
            await asyncio.wait_for(started.wait(), HANG_S)
            closing = asyncio.create_task(served.server.close(grace_s=HANG_S))
            idle_closed = await idle.closed_by_server()
            release.set()
            answer = await busy.answer()
            await closing
            return idle_closed, answer, await busy.closed_by_server()

    idle_closed, answer, busy_closed = run(main)
    assert idle_closed and answer.body == b"done" and busy_closed
