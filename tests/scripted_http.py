"""A real HTTP/1.1 server on loopback whose every answer a test writes: the bench's client, target
discovery and runner are tested over a real socket, against replies an engine would give (a stream,
an error body, a closed connection, no answer at all), without starting an engine.

    async with ScriptedHttp(answer) as server:      # answer(request) -> Reply
        client = Client(server.url)

It runs in the test's own event loop, or in a thread of its own for code that runs its own loop
(`in_thread`); each request is recorded (`server.requests`) with the connection it came on, so
keep-alive and retries can be counted. `InstantVllm` is an answer that behaves like vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from launcher.bench.workload import TEMPLATE_TOKENS

HANG_S = 300.0  # a wait that must end by an event fails only on a hang (docs/decisions/0013)


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection: int  # 1 for the first connection the server accepted, 2 for the next, ...

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the server does with one request: write `parts` (each its own write), then close or not.
    `hang` writes nothing and never answers; `close` without parts hangs up at once."""

    parts: tuple[bytes, ...] = ()
    close: bool = False
    hang: bool = False


HANG = Reply(hang=True)
HANG_UP = Reply(close=True)


def json_reply(status: int, payload: object, *, close: bool = False) -> Reply:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return Reply((head.encode() + (b"Connection: close\r\n" if close else b"") + b"\r\n" + body,), close)


def text_reply(status: int, text: str) -> Reply:
    body = text.encode()
    return Reply((f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body,))


def sse_reply(events: Sequence[object], *, done: bool = True) -> Reply:
    """A streamed chat completion as vLLM sends it: chunked, one `data:` event per chunk."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    payloads = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
    payloads += [b"data: [DONE]\n\n"] if done else []
    chunks = [f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in payloads]
    return Reply((head, *chunks, b"0\r\n\r\n"))


def chat_stream(words: Sequence[str], *, prompt_tokens: int = 20, finish: str = "stop") -> Reply:
    """A chat completion as vLLM streams it: the role first, a token a chunk, the finish reason on the
    last one, then the usage (`stream_options.include_usage`)."""

    def choice(delta: dict[str, str], finish_reason: str | None = None) -> dict[str, object]:
        return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    events: list[object] = [choice({"role": "assistant", "content": ""})]
    events += [choice({"content": w}, finish if k == len(words) - 1 else None) for k, w in enumerate(words)]
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words)}
    events.append({"id": "chatcmpl-1", "choices": [], "usage": usage})
    return sse_reply(events)


@dataclass
class ScriptedHttp:
    answer: Callable[[Request], Reply]
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def __aenter__(self) -> ScriptedHttp:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._open):
            writer.close()  # a handler waiting on its client sees the end of the stream and returns
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        self._open.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while (request := await _read_request(reader, connection)) is not None:
                self.requests.append(request)
                reply = self.answer(request)
                if reply.hang:
                    await reader.read()  # until the client gives up and closes
                    return
                for part in reply.parts:
                    writer.write(part)
                    await writer.drain()
                if reply.close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._open.discard(writer)
            writer.close()


@contextlib.contextmanager
def in_thread(answer: Callable[[Request], Reply]) -> Iterator[ScriptedHttp]:
    """The server on an event loop in its own thread, for code that calls `asyncio.run` itself."""
    server = ScriptedHttp(answer)
    loop = asyncio.new_event_loop()
    ready, failed = threading.Event(), []
    stop: asyncio.Future[None] = loop.create_future()

    async def main() -> None:
        async with server:
            ready.set()
            await stop

    def run() -> None:
        try:
            loop.run_until_complete(main())
        except BaseException as err:  # the test learns of it below, not from a dead thread
            failed.append(err)
            ready.set()
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="scripted-http", daemon=True)
    thread.start()
    assert ready.wait(HANG_S) and not failed, failed
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(HANG_S)


async def _read_request(reader: asyncio.StreamReader, connection: int) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed the connection between requests
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body, connection)


@dataclass
class InstantVllm:
    """Answers like vLLM, at once: a token a word of the prompt, four output words, /v1/models, and
    /metrics counters that move with what it served. Each knob is one way a real server differs."""

    max_model_len: int = 32768
    cold_hits: bool = False  # a prefix cache that answers even unique prompts
    reasoning: bool = False
    metrics: bool = True
    started: float = field(default_factory=lambda: time.time() - 3600)
    tokens_per_word: float = 1.3
    refuse_probe_above: int | None = None  # a probe prompt longer than this gets vLLM's 400
    probe_status: int = 200
    queries: int = 0
    hits: int = 0
    served: int = 5
    chats: list[dict[str, object]] = field(default_factory=list)
    scrapes: int = 0

    def __call__(self, request: Request) -> Reply:
        if request.path == "/metrics":
            self.scrapes += 1
            return self._metrics()
        if request.path == "/v1/models":
            return json_reply(
                200, {"object": "list", "data": [{"id": "m", "max_model_len": self.max_model_len}]}
            )
        body = request.json()
        self.chats.append(body)
        text = " ".join(str(m["content"]) for m in body["messages"])
        tokens = int(len(text.split()) * self.tokens_per_word) + TEMPLATE_TOKENS
        probe = body["max_tokens"] == 1
        if probe and self.probe_status != 200:
            return json_reply(self.probe_status, {"error": {"message": "engine dead", "code": 500}})
        if probe and self.refuse_probe_above is not None and tokens > self.refuse_probe_above:
            message = f"This model's maximum context length is {self.refuse_probe_above} tokens."
            return json_reply(400, {"error": {"message": message, "type": "BadRequestError", "code": 400}})
        self.queries += tokens
        self.hits += tokens // 2 if self.cold_hits else 0
        self.served += 1
        return self._stream(tokens, 1 if probe else 4)

    def _stream(self, prompt_tokens: int, output: int) -> Reply:
        field_name = "reasoning" if self.reasoning else "content"
        events: list[object] = [
            {"id": "c", "choices": [{"index": 0, "delta": {field_name: f" w{k}"}, "finish_reason": None}]}
            for k in range(output)
        ]
        if self.reasoning:
            events.append({"id": "c", "choices": [{"index": 0, "delta": {"content": "ok"}}]})
        events.append({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": output}
        events.append({"id": "c", "choices": [], "usage": usage})
        return sse_reply(events)

    def _metrics(self) -> Reply:
        if not self.metrics:
            return json_reply(404, {"detail": "Not Found"})
        return text_reply(
            200,
            f"process_start_time_seconds {self.started}\n"
            f'vllm:prefix_cache_queries_total{{engine="0"}} {self.queries}\n'
            f'vllm:prefix_cache_hits_total{{engine="0"}} {self.hits}\n'
            f'vllm:request_success_total{{finished_reason="stop"}} {self.served}\n',
        )
