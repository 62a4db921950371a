"""What the simulator's handlers see of HTTP: a request read whole, a response, a stream, the router.

Shaped as vLLM's FastAPI app answers (vllm-facts.md §15): a JSON body is compact UTF-8, headers go
out lower-cased in Starlette's order; an unknown path is 404 `{"detail":"Not Found"}`, a known one
asked with another method 405 `{"detail":"Method Not Allowed"}` with `allow` naming the method of
the path's first route (vLLM registers one method per route, GET without HEAD). The connection
side, h11 and the socket, is `http_server`'s.
"""

from __future__ import annotations

import http
import json
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, overload
from urllib.parse import parse_qsl, quote


def phrase(status: int) -> str:
    """The reason phrase uvicorn sends and logs: Python's `http.HTTPStatus`."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


class ResponseSink(Protocol):
    """Where one response goes: its head, its data, its end (the server's side of an exchange)."""

    started: bool

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None: ...
    async def send(self, data: bytes) -> None: ...
    async def end(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Query:
    """A query string's pairs in order; `get` is the last value, as Starlette's QueryParams."""

    pairs: tuple[tuple[str, str], ...]

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        values = self.getall(name)
        return values[-1] if values else default

    def getall(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]


@dataclass(frozen=True, slots=True)
class Headers:
    """A request's headers, names lower-cased; `get` is the first of a repeated one, as Starlette's."""

    pairs: tuple[tuple[str, str], ...]

    def get(self, name: str, default: str | None = None) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.pairs if key == wanted), default)


@dataclass(frozen=True, slots=True)
class Request:
    """One request, its body read whole before the handler runs."""

    method: str
    path: str  # percent-decoded, as uvicorn's scope has it
    query_string: str
    headers: Headers
    body: bytes
    http_version: str
    peer: tuple[str, int]
    sink: ResponseSink = field(repr=False, compare=False)

    @property
    def query(self) -> Query:
        return Query(tuple(parse_qsl(self.query_string, keep_blank_values=True)))

    @property
    def content_length(self) -> int | None:
        raw = self.headers.get("content-length")
        return int(raw) if raw is not None and raw.isdigit() else None

    @property
    def path_qs(self) -> str:
        """The target as uvicorn's access log prints it: the path quoted again, the query as sent."""
        return quote(self.path) + (f"?{self.query_string}" if self.query_string else "")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Response:
    """A whole response: `content-length` is its body's."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def head(self) -> list[tuple[str, str]]:
        """Starlette's order: the handler's headers, then `content-length`, then `content-type`."""
        head = [*self.headers, ("content-length", str(len(self.body)))]
        if self.content_type:
            head.append(("content-type", self.content_type))
        return head

    @property
    def body_length(self) -> int:
        return len(self.body)


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """FastAPI's JSONResponse: compact, UTF-8 kept."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    extra = tuple((name.lower(), value) for name, value in (headers or {}).items())
    return Response(status, body, "application/json", extra)


class StreamResponse:
    """A response written as it is made: chunked, each `write` handed to the socket at once."""

    def __init__(self, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.headers = [(name.lower(), value) for name, value in (headers or {}).items()]
        self.body_length = 0
        self._sink: ResponseSink | None = None

    async def start(self, request: Request) -> None:
        self._sink = request.sink
        await self._sink.start(self.status, self.headers)

    async def write(self, data: bytes) -> None:
        assert self._sink is not None, "start() first"
        await self._sink.send(data)
        self.body_length += len(data)

    async def end(self) -> None:
        if self._sink is not None:
            await self._sink.end()


Reply = Response | StreamResponse
Handler = Callable[[Request], Coroutine[Any, Any, Reply]]


class Router:
    """Method and path to a handler, FastAPI's way: each route one method, in the order added."""

    def __init__(self) -> None:
        self._routes: dict[str, dict[str, Handler]] = {}

    def add(self, method: str, path: str, handler: Handler) -> None:
        self._routes.setdefault(path, {})[method] = handler

    def has(self, request: Request) -> bool:
        return request.method in self._routes.get(request.path, {})

    async def dispatch(self, request: Request) -> Reply:
        methods = self._routes.get(request.path)
        if methods is None:
            return json_response({"detail": "Not Found"}, 404)
        handler = methods.get(request.method)
        if handler is None:
            return json_response({"detail": "Method Not Allowed"}, 405, {"allow": next(iter(methods))})
        return await handler(request)
