"""The measuring HTTP client: streams over our own keep-alive connections, GETs over aiohttp.

Why not aiohttp for the streams: measured against the simulator's ground truth, its request
writing (a separate task) and reader wake-ups added milliseconds under concurrency (bench/
bench_accuracy.py, docs/bench.md). Here a request is one `transport.write` stamped just before
it, and every chunk is stamped in `data_received` (connection.py); nothing else runs per chunk but
HTTP framing. Responses are parsed only after the round (`record.py`). `time.monotonic()` is
CLOCK_MONOTONIC on Linux, the clock of the simulator's ground truth.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from launcher.bench.connection import StreamConnection
from launcher.bench.exchange import Exchange, Tag

CONNECT_TIMEOUT_S = 10.0


class Client:
    def __init__(self, base_url: str, *, api_key: str | None = None, read_timeout_s: float = 900.0) -> None:
        self.base_url = base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.api_key = api_key
        self.read_timeout_s = read_timeout_s
        self._idle: list[StreamConnection] = []
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _request(self, path: str, body: bytes, request_id: str) -> bytes:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        lines = [
            f"POST {self.prefix}{path} HTTP/1.1",
            f"Host: {host}:{self.port}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            f"Content-Length: {len(body)}",
            f"X-Request-Id: {request_id}",
        ]
        lines += [f"{k}: {v}" for k, v in self._headers().items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def _connection(self) -> StreamConnection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context() if self.tls else None
        _, conn = await asyncio.wait_for(
            loop.create_connection(StreamConnection, self.host, self.port, ssl=context), CONNECT_TIMEOUT_S
        )
        return conn

    async def stream(self, path: str, body: bytes, tag: Tag, request_id: str) -> Exchange:
        """POST and collect the body's chunks with arrival times; failures come back as values."""
        request = self._request(path, body, request_id)
        for attempt in (1, 2):  # a pooled connection the server closed while idle gets one retry
            try:
                conn = await self._connection()
            except (OSError, TimeoutError) as err:
                now = time.monotonic()
                return Exchange(tag, request_id, now, now, 0, (), f"connect: {type(err).__name__}: {err}")
            t_send, done = conn.send(request)
            try:
                await asyncio.wait_for(done, self.read_timeout_s)
            except TimeoutError:
                conn.close()
                return Exchange(
                    tag,
                    request_id,
                    t_send,
                    time.monotonic(),
                    0,
                    tuple(conn.chunks),
                    f"no complete response within {self.read_timeout_s:.0f}s",
                )
            if conn.error and not conn.chunks and conn.framer.status == 0 and attempt == 1:
                conn.close()
                continue
            break
        return self._exchange(conn, tag, request_id, t_send)

    def _exchange(self, conn: StreamConnection, tag: Tag, request_id: str, t_send: float) -> Exchange:
        chunks = tuple(conn.chunks)
        t_end = chunks[-1][0] if chunks else time.monotonic()
        status = conn.framer.status
        error = conn.error
        if status != 200 and error is None:
            error = _error_text(status, b"".join(c for _, c in chunks).decode("utf-8", "replace"))
        if conn.reusable:
            self._idle.append(conn)
        else:
            conn.close()
        return Exchange(tag, request_id, t_send, t_end, status, chunks if status == 200 else (), error)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Client used outside `async with`")
        return self._session

    async def get_text(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        url = self.base_url + path
        async with self.session.get(url, headers=self._headers(), timeout=timeout) as resp:
            return resp.status, await resp.text(errors="replace")

    async def get_json(self, path: str, timeout_s: float = 10.0) -> tuple[int, Any]:
        status, text = await self.get_text(path, timeout_s)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, None


def _error_text(status: int, text: str) -> str:
    try:
        payload = json.loads(text)
    except ValueError:
        return f"HTTP {status}: {text[:300]}"
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f"HTTP {status}: {message or text[:300]}"
