"""HTTP/1.1 over asyncio streams through h11: the simulator's server, behaving as vLLM's uvicorn.

vLLM serves through uvicorn: its httptools protocol where httptools is installed (vLLM's
`fastapi[standard]` brings it), else its h11 one. What both do, this does (their behaviour, not
their code; vllm-facts.md §15, docs/decisions/0015-simulator-http-on-h11.md):
- every response begins `date`, `server: uvicorn`; a stream is chunked;
- a request that cannot be parsed is logged `Invalid HTTP request received.` and answered 400 in
  plain text with `connection: close`, and the connection is closed;
- after an answer a connection idles at most `keep_alive_s` (`VLLM_HTTP_TIMEOUT_KEEP_ALIVE`);
- a client that goes away cancels its request's handler (Starlette's `listen_for_disconnect`,
  vLLM's `with_cancellation`); a handler's exception is logged with its traceback and answered 500.
vLLM takes a body of any size; the simulator refuses one over `max_body_bytes` with 413 (its own
bound: a test or a client must not make it hold gigabytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import socket
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote

import h11

from vllm_sim.http_messages import (
    Handler,
    Headers,
    Reply,
    Request,
    Response,
    ResponseSink,
    json_response,
    phrase,
)

READ_BYTES = 65536
BACKLOG = 2048  # uvicorn's default


class ClientGone(ConnectionError):
    """The client closed its connection: nothing written now reaches anyone."""


class _TooLarge(Exception):
    """The request's body is over the limit: answered 413, the connection closed."""


AccessLog = Callable[[Request, int], None]


class Exchange:
    """One response on one connection, through h11: head, data, end; no body to a HEAD."""

    def __init__(self, conn: h11.Connection, writer: asyncio.StreamWriter, head_only: bool) -> None:
        self._conn = conn
        self._writer = writer
        self._head_only = head_only
        self.on_start: Callable[[int], None] = lambda status: None
        self.started = False
        self.complete = False

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.started = True
        self.on_start(status)  # uvicorn logs the access line as the head goes out
        default = [("date", email.utils.formatdate(usegmt=True)), ("server", "uvicorn")]
        head = h11.Response(status_code=status, headers=default + headers, reason=phrase(status))
        await self._put(self._conn.send(head))

    async def send(self, data: bytes) -> None:
        if not self._head_only and data:
            await self._put(self._conn.send(h11.Data(data=data)))

    async def end(self) -> None:
        if not self.complete:
            self.complete = True
            await self._put(self._conn.send(h11.EndOfMessage()))

    async def _put(self, data: bytes | None) -> None:
        if self._writer.is_closing():
            raise ClientGone("the client closed the connection")
        self._writer.write(data or b"")  # the bytes reach the socket here, unless it is full
        await self._writer.drain()


@dataclass(frozen=True, slots=True)
class Limits:
    keep_alive_s: float  # idle time between requests before the server closes
    max_body_bytes: int  # the simulator's own bound (vLLM has none)
    max_event_bytes: int  # h11's bound on an incomplete head (`--h11-max-incomplete-event-size`)


class HttpServer:
    """Serves `app` on a socket bound elsewhere; `start` is when it begins to listen."""

    def __init__(self, app: Handler, limits: Limits, log: Callable[[str], None], access: AccessLog) -> None:
        self.app = app
        self.limits = limits
        self.log = log  # uvicorn's error logger: one raw line on stderr
        self.access = access
        self.closing = False
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], _Connection] = {}

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._accept, sock=sock, backlog=BACKLOG)

    async def close(self, grace_s: float) -> None:
        """Stop listening, close idle connections, give requests `grace_s` to finish, then drop
        their connections (a dropped client cancels its handler). Tasks are never cancelled from
        here: asyncio's streams log a connection task that ends cancelled as an error."""
        self.closing = True
        if self._server is not None:
            self._server.close()
        for connection in self._connections.values():
            if connection.idle:
                connection.writer.close()
        if self._connections:
            _, pending = await asyncio.wait(set(self._connections), timeout=grace_s)
            for task in pending:
                self._connections[task].writer.transport.abort()
            if pending:
                await asyncio.wait(pending, timeout=grace_s)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = connection = _Connection(self, reader, writer)
        try:
            await connection.run()
        finally:
            del self._connections[task]


class _Connection:
    """One client connection: requests one after another, each answered before the next is read."""

    def __init__(
        self, server: HttpServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=server.limits.max_event_bytes)
        self.idle = True  # waiting for a request's first byte: a shutdown closes it at once
        self.answered = False
        peer = writer.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)

    async def run(self) -> None:
        try:
            while await self._one_cycle():
                self.conn.start_next_cycle()
        except (ConnectionError, h11.LocalProtocolError):
            pass  # the client went away, or an answer could not be framed: nothing left to say
        finally:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()

    async def _one_cycle(self) -> bool:
        """One request and its answer; False where the connection must close."""
        try:
            request = await self._read_request()
        except h11.RemoteProtocolError:
            self.server.log("WARNING:  Invalid HTTP request received.")
            await self._refuse(400, b"Invalid HTTP request received.", "text/plain; charset=utf-8")
            return False
        except _TooLarge:
            await self._refuse(413, json_response({"detail": phrase(413)}).body, "application/json")
            await self._linger()
            return False
        if request is None:
            return False
        await self._respond(request)
        both_done = self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE
        return both_done and not self.server.closing

    async def _read_request(self) -> Request | None:
        """The next request, body and all; None where the client closed or idled out first."""
        event = await self._next_event(first=True)
        if not isinstance(event, h11.Request):
            return None
        self.idle = False
        length = next((v for k, v in event.headers if k == b"content-length"), b"0")
        if int(length) > self.server.limits.max_body_bytes:  # h11 has checked it is digits
            raise _TooLarge
        if self.conn.they_are_waiting_for_100_continue:
            await self._put(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        body = await self._read_body()
        exchange = Exchange(self.conn, self.writer, head_only=event.method == b"HEAD")
        raw_path, _, query = event.target.decode("ascii").partition("?")
        request = Request(
            method=event.method.decode("ascii"),
            path=unquote(raw_path),
            query_string=query,
            headers=Headers(tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers)),
            body=body,
            http_version=event.http_version.decode("ascii"),
            peer=self.peer,
            sink=exchange,
        )
        exchange.on_start = lambda status: self.server.access(request, status)
        return request

    async def _read_body(self) -> bytes:
        body = bytearray()
        while True:
            event = await self._next_event(first=False)
            if isinstance(event, h11.EndOfMessage):
                return bytes(body)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.server.limits.max_body_bytes:
                    raise _TooLarge
            elif event is None or isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the client closed the connection mid-request")

    async def _next_event(self, first: bool) -> h11.Event | None:
        """h11's next event, reading as it needs; None where the connection idled out between
        requests (uvicorn's keep-alive timeout: only after a first answer, only before any byte)."""
        while True:
            event = self.conn.next_event()
            if event is h11.PAUSED:
                return None  # cannot happen: a cycle starts only once both sides are done
            if event is not h11.NEED_DATA:
                assert isinstance(event, h11.Event)
                return event
            idle = first and self.answered and not self.conn.trailing_data[0]
            try:
                data = await asyncio.wait_for(
                    self.reader.read(READ_BYTES), self.server.limits.keep_alive_s if idle else None
                )
            except TimeoutError:
                return None
            if not data:
                return None  # the client closed: nothing to answer, nothing to log (uvicorn's way)
            self.conn.receive_data(data)

    async def _respond(self, request: Request) -> None:
        """Run the handler while watching the connection: a client that leaves cancels it."""
        work = asyncio.create_task(self.server.app(request))
        watch = asyncio.create_task(self._gone())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()  # the client left (or the server is stopping): the handler ends here
            await asyncio.gather(watch, work, return_exceptions=True)
        await self._finish(request, work)
        self.answered = True
        self.idle = True

    async def _finish(self, request: Request, work: asyncio.Task[Reply]) -> None:
        """Write what the handler returned, end a stream it left open, or answer its exception."""
        if work.cancelled():
            raise ClientGone("the client closed the connection")
        error = work.exception()
        if isinstance(error, ConnectionError):
            raise error
        exchange = request.sink
        if error is not None:
            lines = traceback.format_exception(error)
            self.server.log("ERROR:    Exception in ASGI application\n" + "".join(lines).rstrip("\n"))
            if exchange.started:
                raise ClientGone("the response had begun: the connection is closed instead")
            await self._whole(exchange, Response(500, b"Internal Server Error", "text/plain; charset=utf-8"))
            return
        reply = work.result()
        if isinstance(reply, Response):
            await self._whole(exchange, reply)
        elif not exchange.started:  # a stream never started: what it is, with no body
            await exchange.start(reply.status, reply.headers)
        await exchange.end()

    @staticmethod
    async def _whole(exchange: ResponseSink, response: Response) -> None:
        await exchange.start(response.status, response.head())
        await exchange.send(response.body)
        await exchange.end()

    async def _gone(self) -> None:
        """Returns once the client has closed; a pipelined request meanwhile is kept for h11."""
        while True:
            try:
                data = await self.reader.read(READ_BYTES)
            except ConnectionError:
                return
            if not data:
                return
            self.conn.receive_data(data)
            if len(self.conn.trailing_data[0]) > self.server.limits.max_event_bytes:
                await asyncio.Event().wait()  # enough buffered: stop reading until the handler ends

    async def _refuse(self, status: int, body: bytes, content_type: str) -> None:
        """An answer before any handler ran, with no access line, then the connection closes
        (uvicorn's 400 from its httptools protocol, the one vLLM's `fastapi[standard]` brings)."""
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        length = str(len(body))
        headers = [("content-type", content_type), ("content-length", length), ("connection", "close")]
        exchange = Exchange(self.conn, self.writer, head_only=False)
        await exchange.start(status, headers)
        await exchange.send(body)
        await exchange.end()

    async def _put(self, data: bytes | None) -> None:
        self.writer.write(data or b"")
        await self.writer.drain()

    async def _linger(self) -> None:
        """Read and drop what the client still sends, so the answer is read before the close
        (closing with unread data makes the kernel reset the connection)."""
        self.idle = True  # nothing more to answer: a shutdown may close it at once
        with contextlib.suppress(ConnectionError, TimeoutError):
            self.writer.write_eof()
            dropped = 0
            while dropped <= self.server.limits.max_body_bytes:
                data = await asyncio.wait_for(self.reader.read(READ_BYTES), self.server.limits.keep_alive_s)
                if not data:
                    return
                dropped += len(data)
