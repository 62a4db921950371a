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
