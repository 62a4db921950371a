"""A tiny upstream for the front door's tests, run as its own process:
`python tests/frontdoor_upstream.py NAME PORT`. It prints `ready PORT` once it listens.

- `POST /v1/echo`: `{"who": NAME, "body": …, "path": …}` — which engine answered, with the body it got.
- `POST /v1/stream`: SSE, one chunk (`data: first`), then nothing until `POST /control/release`
  arrives (directly, not through the door), then `data: second` and `data: [DONE]`.
- `GET /control/seen`: every path it was asked, in order (what the door forwarded).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG_S = 300.0
NAME = sys.argv[1] if len(sys.argv) > 1 else "upstream"
RELEASE = threading.Event()
SEEN: list[str] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/control/seen":
            self._json(200, {"seen": SEEN})
            return
        SEEN.append(self.path)
        self._json(200, {"who": NAME, "path": self.path})

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
        if self.path == "/control/release":
            RELEASE.set()
            self._json(200, {"released": True})
            return
        SEEN.append(self.path)
        if self.path == "/v1/stream":
            self._stream()
            return
        self._json(200, {"who": NAME, "body": body, "path": self.path})

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(f"data: first from {NAME}\n\n")
        if not RELEASE.wait(HANG_S):
            return
        self._chunk("data: second\n\n")
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, text: str) -> None:
        data = text.encode("utf-8")
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler)
    server.daemon_threads = True
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
