"""The real implementations of the gates' HTTP and memory interfaces: requests, psutil, NVML's seam.

`requests` is imported when the first request is made, not when `launch` starts: on the serve path
that import (~0.1 s) then overlaps the engine's own start instead of delaying its spawn.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psutil

from gates.context import GpuBytesFn, HttpReply

if TYPE_CHECKING:
    import requests


class RequestsHttp:
    """HTTP to one server; network failures come back as status 0, never as exceptions.

    One `requests.Session` per calling thread: requests does not promise a session is thread-safe,
    and gates send independent requests from several threads at once."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()

    @property
    def session(self) -> requests.Session:
        import requests

        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            if self._api_key:
                session.headers["Authorization"] = f"Bearer {self._api_key}"
            self._local.session = session
            with self._sessions_lock:
                self._sessions.append(session)
        return session

    def get(self, path: str, timeout_s: float) -> HttpReply:
        """A GET that loses its connection before any answer is sent once more, on a new one: the
        watch reads /health and /metrics every 5 s and uvicorn closes a connection idle for 5 s
        (`--timeout-keep-alive`), so a kept connection can close under the request. A timeout is not
        retried (the server is slow, and the deadline is the caller's), and nothing but a GET is."""
        import requests

        def send() -> requests.Response:
            return self.session.get(self.base_url + path, timeout=timeout_s)

        try:
            return self._reply(send())
        except requests.Timeout as err:
            return self._failure(err)
        except requests.ConnectionError:
            return self._call(send)

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        return self._call(lambda: self.session.post(self.base_url + path, json=body, timeout=timeout_s))

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        import requests

        try:
            with self.session.post(self.base_url + path, json=body, timeout=timeout_s, stream=True) as reply:
                if reply.status_code != 200:
                    yield json.dumps({"error": {"status": reply.status_code, "body": reply.text[:2000]}})
                    return
                for chunk in reply.iter_lines():
                    raw = chunk.decode("utf-8", errors="replace")
                    if raw.startswith("data:"):
                        payload = raw[5:].strip()
                        yield payload
                        if payload == "[DONE]":
                            return
        except requests.RequestException as err:
            yield json.dumps({"error": {"status": 0, "body": str(err)}})

    @classmethod
    def _call(cls, send: Callable[[], requests.Response]) -> HttpReply:
        import requests

        try:
            return cls._reply(send())
        except requests.RequestException as err:
            return cls._failure(err)

    @staticmethod
    def _reply(reply: requests.Response) -> HttpReply:
        return HttpReply(reply.status_code, reply.text)

    @staticmethod
    def _failure(err: requests.RequestException) -> HttpReply:
        import requests

        return HttpReply(0, "", f"{type(err).__name__}: {err}", timed_out=isinstance(err, requests.Timeout))

    def close(self) -> None:
        with self._sessions_lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()


class ProcessMemory:
    """RSS of a process tree from psutil; GPU memory per process from the NVML seam when given."""

    def __init__(self, gpu_bytes: GpuBytesFn | None = None) -> None:
        self._gpu_bytes = gpu_bytes

    def rss_bytes(self, pids: Sequence[int]) -> int:
        total = 0
        for pid in pids:
            try:
                total += psutil.Process(pid).memory_info().rss
            except psutil.Error:
                continue
        return total

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        return self._gpu_bytes(pids) if self._gpu_bytes is not None else None
