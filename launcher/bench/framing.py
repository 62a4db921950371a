"""HTTP/1.1 response framing, incremental: status, headers, then the body de-chunked as it arrives.

Only what a streaming client needs: the status code, where the body ends (chunked transfer
encoding, Content-Length, or the connection closing) and whether the connection may be reused.
Each `feed` returns the body bytes that this network chunk carried, so the caller can keep the
chunk's arrival time beside exactly those bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_HEADER_BYTES = 64 * 1024


class FramingError(Exception):
    """The response is not HTTP/1.1 as this client understands it."""


@dataclass(slots=True)
class ResponseFramer:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    complete: bool = False
    keep_alive: bool = True
    _head: bytes = b""
    _in_body: bool = False
    _chunked: bool = False
    _remaining: int = -1  # body bytes left (Content-Length) or in the current chunk
    _pending: bytes = b""  # an incomplete chunk-size line or CRLF
    _trailer: bool = False  # after the last (0) chunk: waiting for the blank line

    def feed(self, data: bytes) -> bytes:
        """Take one network chunk; return the body bytes it carried (possibly b"")."""
        if self.complete:
            return b""
        if not self._in_body:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                if len(self._head) > MAX_HEADER_BYTES:
                    raise FramingError("response headers larger than 64 KiB")
                return b""
            data = self._head[end + 4 :]
            self._parse_head(self._head[:end].decode("latin-1"))
            self._head = b""
            self._in_body = True
        if self._chunked:
            return self._dechunk(data)
        if self._remaining >= 0:
            body = data[: self._remaining]
            self._remaining -= len(body)
            self.complete = self._remaining == 0
            return body
        return data  # delimited by the connection closing

    def _parse_head(self, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise FramingError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        self.status = int(parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        connection = self.headers.get("connection", "").lower()
        self.keep_alive = "close" not in connection and parts[0] != "HTTP/1.0"
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        if not self._chunked and "content-length" in self.headers:
            self._remaining = int(self.headers["content-length"])
            self.complete = self._remaining == 0
        elif not self._chunked:
            self.keep_alive = False

    def _dechunk(self, data: bytes) -> bytes:
        out: list[bytes] = []
        buf = self._pending + data if self._pending else data
        self._pending = b""
        pos = 0
        while pos < len(buf) and not self.complete:
            if self._remaining > 0:  # inside a chunk's payload
                piece = buf[pos : pos + self._remaining]
                out.append(piece)
                self._remaining -= len(piece)
                pos += len(piece)
                continue
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                self._pending = buf[pos:]
                break
            line = buf[pos:line_end]
            pos = line_end + 2
            if self._remaining == 0:  # the CRLF that closes a chunk's payload
                self._remaining = -1
                if line:
                    raise FramingError("chunk payload longer than its size")
                continue
            if self._trailer:
                self.complete = not line  # trailers end with a blank line
                continue
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                self._trailer = True
            else:
                self._remaining = size
        return b"".join(out)

    def connection_closed(self) -> None:
        """The peer closed: a close-delimited body is complete; anything else was cut short."""
        if self._in_body and not self._chunked and self._remaining < 0:
            self.complete = True
