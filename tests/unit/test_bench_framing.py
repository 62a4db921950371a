"""HTTP/1.1 response framing for the streaming client, on every possible network split."""

from __future__ import annotations

import pytest

from launcher.bench.framing import FramingError, ResponseFramer

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [b'data: {"a": 1}\n\n', b'data: {"b": 22}\n\n', b"data: [DONE]\n\n"]
CHUNKED = HEAD + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n"


def feed_all(parts: list[bytes]) -> tuple[ResponseFramer, bytes]:
    framer = ResponseFramer()
    body = b"".join(framer.feed(p) for p in parts)
    return framer, body


@pytest.mark.parametrize("cut", range(1, len(CHUNKED)))
def test_chunked_body_survives_any_split(cut: int) -> None:
    framer, body = feed_all([CHUNKED[:cut], CHUNKED[cut:]])
    assert body == b"".join(EVENTS) and framer.complete and framer.keep_alive and framer.status == 200


def test_byte_by_byte() -> None:
    framer, body = feed_all([bytes([b]) for b in CHUNKED])
    assert body == b"".join(EVENTS) and framer.complete


def test_incomplete_until_the_last_chunk_and_trailers() -> None:
    framer, _ = feed_all([CHUNKED[:-2]])
    assert not framer.complete
    with_trailer = CHUNKED[:-2] + b"X-Trailer: 1\r\n\r\n"
    framer, body = feed_all([with_trailer])
    assert framer.complete and body == b"".join(EVENTS)


def test_content_length_error_body() -> None:
    payload = b'{"error": {"message": "too long"}}'
    raw = (
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(payload)
        + payload
    )
    framer, body = feed_all([raw[:30], raw[30:]])
    assert framer.status == 400 and body == payload and framer.complete and not framer.keep_alive


def test_close_delimited_body_completes_on_close() -> None:
    framer, body = feed_all([b"HTTP/1.1 200 OK\r\n\r\nabc", b"def"])
    assert not framer.complete and body == b"abcdef"
    framer.connection_closed()
    assert framer.complete and not framer.keep_alive


def test_garbage_is_a_framing_error() -> None:
    with pytest.raises(FramingError):
        ResponseFramer().feed(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_chunk_extensions_and_upper_case_sizes_are_legal() -> None:
    body = b"0123456789"
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA;name=value\r\n" + body + b"\r\n0\r\n\r\n"
    framer, got = feed_all([raw])
    assert got == body and framer.complete


def test_a_zero_content_length_is_complete_with_the_head() -> None:
    framer = ResponseFramer()
    assert framer.feed(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n") == b""
    assert framer.complete and framer.status == 204 and framer.keep_alive


def test_bytes_past_the_content_length_are_not_body() -> None:
    framer, body = feed_all([b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcEXTRA", b"more"])
    assert body == b"abc" and framer.complete


def test_nothing_is_body_once_the_response_is_complete() -> None:
    framer, _ = feed_all([CHUNKED])
    assert framer.feed(b"HTTP/1.1 200 OK\r\n\r\nnext") == b""


def test_header_names_are_case_insensitive_and_chunked_may_follow_another_coding() -> None:
    framer, body = feed_all(
        [CHUNKED.replace(b"Transfer-Encoding: chunked", b"TRANSFER-encoding: gzip, Chunked")]
    )
    assert body == b"".join(EVENTS) and framer.headers["transfer-encoding"] == "gzip, Chunked"


@pytest.mark.parametrize(
    ("head", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: CLOSE\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),  # 1.0 closes unless told otherwise
        (b"HTTP/1.1 200 OK\r\n\r\n", False),  # no length: the body ends when the connection does
    ],
)
def test_whether_the_connection_may_serve_another_request(head: bytes, keep_alive: bool) -> None:
    framer, _ = feed_all([head])
    assert framer.keep_alive is keep_alive


def test_headers_may_take_up_to_64_kib_before_they_end() -> None:
    framer = ResponseFramer()
    filler = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (64 * 1024 - 24)
    assert len(filler) == 64 * 1024 and framer.feed(filler) == b""  # at the limit: still waiting
    with pytest.raises(FramingError, match="larger than 64 KiB"):
        framer.feed(b"a")


def test_a_chunk_longer_than_its_size_is_a_framing_error() -> None:
    with pytest.raises(FramingError, match="longer than its size"):
        feed_all([HEAD + b"3\r\nabcd\r\n0\r\n\r\n"])


@pytest.mark.parametrize("line", [b"HTTP/2 200\r\n\r\n", b"HTTP/1.1\r\n\r\n", b"ICY 200 OK\r\n\r\n"])
def test_a_status_line_that_is_not_http_1_is_refused(line: bytes) -> None:
    with pytest.raises(FramingError, match="not an HTTP/1.x status line"):
        ResponseFramer().feed(line)


def test_a_close_cuts_a_body_short_unless_the_close_is_what_ends_it() -> None:
    chunked, _ = feed_all([CHUNKED[: len(HEAD) + 10]])
    chunked.connection_closed()
    assert not chunked.complete  # the last chunk never came
    sized, _ = feed_all([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"])
    sized.connection_closed()
    assert not sized.complete  # 7 bytes missing
    head_only = ResponseFramer()
    head_only.feed(b"HTTP/1.1 200 OK\r\n")
    head_only.connection_closed()
    assert not head_only.complete and head_only.status == 0  # the head never ended


def test_an_error_status_keeps_its_chunked_body() -> None:
    framer, body = feed_all([CHUNKED.replace(b"200 OK", b"503 Service Unavailable")])
    assert framer.status == 503 and body == b"".join(EVENTS) and framer.complete
