"""The bench's measuring client (launcher/bench/client.py, connection.py) and its server discovery
(target.py) over a real loopback socket, against scripted replies: what it sends, when it reuses a
connection or retries, and what each way a reply can go wrong comes back as."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from launcher.bench.client import Client
from launcher.bench.exchange import Exchange, Phase, Tag
from launcher.bench.record import build_record
from launcher.bench.target import Endpoint, ServerUnreachable, Target, discover
from launcher.errors import BadInput
from tests.scripted_http import (
    HANG,
    HANG_UP,
    Reply,
    Request,
    ScriptedHttp,
    chat_stream,
    json_reply,
    sse_reply,
    text_reply,
)

T = TypeVar("T")
TAG = Tag(Phase.TIMED, "short", 1, 1, 0)
BODY = b'{"model": "m", "stream": true}'
# vLLM 0.26's ErrorResponse (entrypoints/openai/engine/protocol.py): {"error": ErrorInfo}
VLLM_400 = {"error": {"message": "max_tokens must be at least 1", "type": "BadRequestError", "param": None,
                      "code": 400}}  # fmt: skip


def served(answer: Callable[[Request], Reply], work: Callable[[ScriptedHttp], Awaitable[T]]) -> T:
    async def main() -> T:
        async with ScriptedHttp(answer) as server:
            return await work(server)

    return asyncio.run(main())


def stream_once(
    answer: Callable[[Request], Reply], read_timeout_s: float = 900.0
) -> tuple[Exchange, ScriptedHttp]:
    async def work(server: ScriptedHttp) -> tuple[Exchange, ScriptedHttp]:
        async with Client(server.url, read_timeout_s=read_timeout_s) as bench:
            return await bench.stream("/v1/chat/completions", BODY, TAG, "bench-r-1"), server

    return served(answer, work)


def test_a_streamed_reply_is_every_chunk_stamped_in_order_and_parsed_after() -> None:
    exchange, server = stream_once(lambda r: chat_stream(["Tides", " rise", " twice"]))
    assert (exchange.status, exchange.error, exchange.request_id) == (200, None, "bench-r-1")
    stamps = [at for at, _ in exchange.chunks]
    assert stamps == sorted(stamps) and stamps[0] >= exchange.t_send and exchange.t_end == stamps[-1]
    record = build_record(exchange)
    assert record.ok and record.content == "Tides rise twice"
    assert (record.output_tokens, record.prompt_tokens, record.tokens_from_usage) == (3, 20, True)
    assert record.finish_reason == "stop" and len(record.event_times) == 3
    assert [(r.method, r.path, r.body) for r in server.requests] == [("POST", "/v1/chat/completions", BODY)]


def test_the_request_carries_its_id_the_key_and_the_gateway_prefix() -> None:
    async def work(server: ScriptedHttp) -> Request:
        async with Client(server.url + "/gw/", api_key="sk-test") as bench:
            await bench.stream("/v1/chat/completions", BODY, TAG, "bench-r-7")
        return server.requests[0]

    request = served(lambda r: chat_stream(["ok"]), work)
    assert request.path == "/gw/v1/chat/completions"
    assert request.headers["x-request-id"] == "bench-r-7"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-length"] == str(len(BODY))
    assert request.headers["host"].startswith("127.0.0.1:")


def test_no_key_no_authorization_header() -> None:
    _, server = stream_once(lambda r: chat_stream(["ok"]))
    assert "authorization" not in server.requests[0].headers


def test_one_keep_alive_connection_serves_one_request_after_another() -> None:
    async def work(server: ScriptedHttp) -> tuple[list[int], int]:
        async with Client(server.url) as bench:
            statuses = [
                (await bench.stream("/v1/chat/completions", BODY, TAG, f"r-{k}")).status for k in range(3)
            ]
        return statuses, server.connections

    assert served(lambda r: chat_stream(["a", "b"]), work) == ([200, 200, 200], 1)


def test_a_connection_that_says_close_is_not_reused() -> None:
    async def work(server: ScriptedHttp) -> tuple[list[int], int]:
        async with Client(server.url) as bench:
            statuses = [(await bench.stream("/x", BODY, TAG, f"r-{k}")).status for k in range(2)]
        return statuses, server.connections

    assert served(lambda r: json_reply(200, {"ok": True}, close=True), work) == ([200, 200], 2)


def test_a_pooled_connection_the_server_dropped_is_retried_once_on_a_new_one() -> None:
    seen: dict[int, int] = {}

    def answer(request: Request) -> Reply:
        seen[request.connection] = seen.get(request.connection, 0) + 1
        # the second request on the first connection: the server had dropped it while it was idle
        return HANG_UP if (request.connection, seen[request.connection]) == (1, 2) else chat_stream(["fine"])

    async def work(server: ScriptedHttp) -> tuple[Exchange, int, int]:
        async with Client(server.url) as bench:
            await bench.stream("/v1/chat/completions", BODY, TAG, "r-1")
            second = await bench.stream("/v1/chat/completions", BODY, TAG, "r-2")
        return second, server.connections, len(server.requests)

    second, connections, requests = served(answer, work)
    assert (second.status, second.error) == (200, None)
    assert (connections, requests) == (2, 3)  # the lost request was sent again, on a new connection


def test_a_server_that_hangs_up_twice_is_an_error_not_a_third_try() -> None:
    exchange, server = stream_once(lambda r: HANG_UP)
    assert exchange.status == 0 and exchange.chunks == ()
    assert exchange.error is not None and exchange.error.startswith("connection closed mid-response")
    assert len(server.requests) == 2


def test_a_reply_cut_short_keeps_what_arrived_and_says_so() -> None:
    whole = chat_stream(["one", "two", "three"])
    cut = Reply(whole.parts[:3], close=True)  # head and two events, then the connection ends
    exchange, _ = stream_once(lambda r: cut)
    assert exchange.status == 200 and exchange.chunks
    assert exchange.error is not None and exchange.error.startswith("connection closed mid-response")
    assert not build_record(exchange).ok


def test_vllms_error_body_becomes_its_message() -> None:
    exchange, _ = stream_once(lambda r: json_reply(400, VLLM_400))
    assert (exchange.status, exchange.chunks) == (400, ())
    assert exchange.error == "HTTP 400: max_tokens must be at least 1"
    bare, _ = stream_once(lambda r: json_reply(401, {"error": "Unauthorized"}))  # vLLM's --api-key check
    assert bare.error == "HTTP 401: Unauthorized"
    unknown, _ = stream_once(lambda r: json_reply(500, {"detail": "boom"}))
    assert unknown.error == 'HTTP 500: {"detail": "boom"}', "a shape it does not know: its text"
    plain, _ = stream_once(lambda r: text_reply(502, "upstream gone"))
    assert plain.error == "HTTP 502: upstream gone"


def test_a_reply_that_never_comes_times_out_with_what_the_client_had() -> None:
    # the timeout's expiry is the outcome here: load can only make it come later
    exchange, _ = stream_once(lambda r: HANG, read_timeout_s=0.2)
    assert exchange.status == 0 and exchange.chunks == ()
    assert exchange.error is not None and exchange.error.startswith("no complete response within")


def test_nothing_listening_is_a_connect_error_as_a_value() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before the client connects: nothing listens

    async def main() -> Exchange:
        async with Client(f"http://127.0.0.1:{port}") as bench:
            return await bench.stream("/v1/chat/completions", BODY, TAG, "r")

    exchange = asyncio.run(main())
    assert exchange.status == 0 and exchange.error is not None
    assert exchange.error.startswith("connect: ConnectionRefusedError")


def test_a_stream_that_is_not_http_is_a_framing_error() -> None:
    exchange, _ = stream_once(lambda r: Reply((b"SSH-2.0-OpenSSH_9.6\r\n\r\n",), close=True))
    assert (
        exchange.status == 0
        and exchange.error is not None
        and "not an HTTP/1.x status line" in exchange.error
    )


def test_events_in_one_network_chunk_share_its_stamp() -> None:
    whole = sse_reply([{"id": "c", "choices": [{"index": 0, "delta": {"content": w}}]} for w in ("a", "b")])
    together = Reply((whole.parts[0] + b"".join(whole.parts[1:]),))
    exchange, _ = stream_once(lambda r: together)
    assert exchange.status == 200 and len(exchange.chunks) == 1
    assert build_record(exchange).content == "ab"


def test_get_json_reads_json_and_says_none_for_anything_else() -> None:
    async def work(server: ScriptedHttp) -> list[tuple[int, object]]:
        async with Client(server.url) as bench:
            return [await bench.get_json("/v1/models"), await bench.get_json("/metrics")]

    def answer(request: Request) -> Reply:
        return json_reply(200, {"data": []}) if request.path == "/v1/models" else text_reply(200, "# HELP")

    assert served(answer, work) == [(200, {"data": []}), (200, None)]


def test_a_client_used_outside_its_context_says_so() -> None:
    with pytest.raises(RuntimeError, match="outside `async with`"):
        _ = Client("http://127.0.0.1:1").session


MODELS = {"object": "list", "data": [{"id": "qwen3-8b", "max_model_len": 32768}, {"id": "lora-a"}]}


def discovered(answer: Callable[[Request], Reply], model: str | None = None) -> Target:
    async def work(server: ScriptedHttp) -> Target:
        async with Client(server.url) as bench:
            return await discover(bench, Endpoint(server.url, model, None, "--url"))

    return served(answer, work)


def test_discovery_takes_the_first_served_model_and_its_max_model_len() -> None:
    target = discovered(lambda r: json_reply(200, MODELS))
    assert (target.model, target.max_model_len, target.origin) == ("qwen3-8b", 32768, "--url")
    lora = discovered(lambda r: json_reply(200, MODELS), model="lora-a")
    assert (lora.model, lora.max_model_len) == ("lora-a", None)


def test_discovery_refuses_a_model_that_is_not_served_naming_those_that_are() -> None:
    with pytest.raises(BadInput, match="model 'llama' is not served") as caught:
        discovered(lambda r: json_reply(200, MODELS), model="llama")
    assert caught.value.hint == "served: lora-a, qwen3-8b"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (json_reply(200, {"data": []}), "lists no model"),
        (json_reply(200, {"object": "list"}), "answered HTTP 200, not a model list"),
        (json_reply(404, {"detail": "Not Found"}), "answered HTTP 404, not a model list"),
        (text_reply(200, "<html>a router's login page</html>"), "not a model list"),
    ],
)
def test_discovery_refuses_what_is_not_an_openai_server(reply: Reply, message: str) -> None:
    with pytest.raises(ServerUnreachable, match=message):
        discovered(lambda r: reply)


def test_discovery_asks_for_a_key_on_401() -> None:
    with pytest.raises(BadInput, match="answered 401 Unauthorized") as caught:
        discovered(lambda r: json_reply(401, {"error": "Unauthorized"}))
    assert not isinstance(caught.value, ServerUnreachable)
    assert caught.value.hint == "pass the key's variable with --api-key-env NAME"


def test_discovery_of_nothing_says_where_it_looked_and_that_bench_starts_no_server() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"

    async def main() -> Target:
        async with Client(url) as bench:
            return await discover(bench, Endpoint(url, None, None, "profile prod"))

    with pytest.raises(
        ServerUnreachable, match=r"nothing answers at http://127\.0\.0\.1:\d+ \(profile prod\)"
    ) as e:
        asyncio.run(main())
    assert e.value.hint is not None and "never starts one" in e.value.hint
