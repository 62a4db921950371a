"""The launcher's HTTP client over a real socket: a GET whose kept connection closes under it is
sent once more on a new connection (uvicorn closes connections idle for 5 s, the watch reads every
5 s); a POST is never sent twice, and a timeout is the caller's answer."""

from __future__ import annotations

from launcher.host.adapters import RequestsHttp
from tests.scripted_http import HANG, HANG_UP, Reply, Request, in_thread, json_reply


def test_a_get_whose_kept_connection_closes_is_sent_again_on_a_new_one() -> None:
    answered: set[int] = set()

    def answer(request: Request) -> Reply:
        if request.connection in answered:
            return HANG_UP
        answered.add(request.connection)
        return json_reply(200, {"ok": True})

    with in_thread(answer) as server:
        http = RequestsHttp(server.url)
        try:
            assert http.get("/health", 10).status == 200
            again = http.get("/health", 10)
        finally:
            http.close()
    assert again.status == 200, again
    assert [r.connection for r in server.requests] == [1, 1, 2]


def test_a_post_whose_connection_closes_is_not_sent_twice() -> None:
    with in_thread(lambda _request: HANG_UP) as server:
        http = RequestsHttp(server.url)
        try:
            reply = http.post_json("/v1/completions", {"prompt": "x"}, 10)
        finally:
            http.close()
    assert reply.status == 0 and not reply.timed_out
    assert len(server.requests) == 1


def test_a_get_that_times_out_is_not_sent_again() -> None:
    with in_thread(lambda _request: HANG) as server:
        http = RequestsHttp(server.url)
        try:
            reply = http.get("/health", 0.3)
        finally:
            http.close()
    assert reply.status == 0 and reply.timed_out
    assert len(server.requests) == 1
