"""Talk to a running front door: where it sends traffic (`point_at`, `target`) and what is in
flight per engine (`upstreams`, `in_flight`, from Caddy's `GET /reverse_proxy/upstreams`).

Where traffic goes is the target file Caddy reads on every attempt (launcher/frontdoor/config.py),
written atomically: a re-point reaches the requests held at the door at their next try and needs
no running door. What is in flight comes from the admin API, over its unix socket (or loopback
port), each request within `timeout_s`. Every failure is one exception, `FrontdoorError`, except
`alive()`, which answers False.
"""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.atomicfile import read_bytes_nofollow, write_atomic
from launcher.frontdoor.config import PROXY_ID
from launcher.frontdoor.door import Door
from launcher.profile.frontdoor_address import AdminAddress, dial_problem

DEFAULT_TIMEOUT_S = 5.0
MAX_ANSWER_BYTES = 1 << 20


class FrontdoorError(Exception):
    """The front door could not be asked or told: its admin API did not answer in time or sensibly,
    or its target file could not be read or written."""


@dataclass(frozen=True, slots=True)
class UpstreamLoad:
    """One line of `GET /reverse_proxy/upstreams`: an address and its requests in flight."""

    address: str
    num_requests: int
    fails: int


class FrontdoorAdmin:
    def __init__(self, door: Door, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.door = door
        self.timeout_s = timeout_s

    # ---- where traffic goes: the target file ----------------------------------------------------
    def point_at(self, dial: str | None) -> None:
        """Send new requests (and those held at the door) to `dial` (`HOST:PORT`); None: hold them
        at the door, up to hold_s, until it points at an engine again."""
        if dial is not None and (problem := dial_problem(dial)) is not None:
            raise ValueError(problem)
        try:
            write_atomic(self.door.target_path, (dial or self.door.hold_dial) + "\n", mode=0o600)
        except OSError as err:
            raise FrontdoorError(f"cannot write {self.door.target_path}: {err.strerror or err}") from err

    def target(self) -> str | None:
        """The dial the door sends traffic to now; None while it holds requests."""
        try:
            text = read_bytes_nofollow(self.door.target_path, limit=4096).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            raise FrontdoorError(f"cannot read {self.door.target_path}: {err}") from err
        if text == self.door.hold_dial:
            return None
        if dial_problem(text) is not None:
            raise FrontdoorError(f"{self.door.target_path} holds {text[:80]!r}, not a dial")
        return text

    # ---- what is in flight: the admin API ---------------------------------------------------------
    def upstreams(self) -> list[UpstreamLoad]:
        """Every address Caddy counts requests for, as it reports them."""
        answer = self._get("/reverse_proxy/upstreams")
        if not isinstance(answer, list):
            raise FrontdoorError(f"{self._where}: /reverse_proxy/upstreams answered {answer!r:.80}")
        return [_load(item, self._where) for item in answer]

    def in_flight(self) -> dict[str, int]:
        """Requests in flight per engine dial (`127.0.0.1:8000`); an engine with none is absent.
        The proxy's own line (its `{file.…}` dial, the sum) and the hold socket are left out."""
        return {
            u.address: u.num_requests
            for u in self.upstreams()
            if u.num_requests > 0 and dial_problem(u.address) is None
        }

    def alive(self) -> bool:
        """The admin API answers, and with this front door's proxy in its config."""
        try:
            handler = self._get(f"/id/{PROXY_ID}")
        except FrontdoorError:
            return False
        return isinstance(handler, dict) and handler.get("handler") == "reverse_proxy"

    @property
    def _where(self) -> str:
        return f"the front door's admin API ({self.door.admin})"

    def _get(self, path: str) -> Any:
        connection = _connection(self.door.admin, self.timeout_s)
        try:
            connection.request("GET", path, headers={"Accept": "application/json"})
            response = connection.getresponse()
            body = response.read(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException) as err:
            raise FrontdoorError(f"{self._where} did not answer GET {path}: {err}") from err
        finally:
            connection.close()
        if response.status != 200 or len(body) > MAX_ANSWER_BYTES:
            raise FrontdoorError(f"{self._where} answered GET {path} with {response.status}: {body[:200]!r}")
        try:
            return json.loads(body)
        except ValueError as err:
            raise FrontdoorError(f"{self._where} answered GET {path} with no JSON: {body[:200]!r}") from err


class _UnixConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a unix socket; the socket's timeout bounds the connect and every read."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _connection(admin: AdminAddress, timeout_s: float) -> http.client.HTTPConnection:
    if admin.socket is not None:
        return _UnixConnection(admin.socket, timeout_s)
    # Caddy checks the Host header of a loopback admin API against its listen address
    host = (admin.host or "127.0.0.1").strip("[]")
    return http.client.HTTPConnection(host, admin.port, timeout=timeout_s)


def _load(item: Any, where: str) -> UpstreamLoad:
    if not (
        isinstance(item, dict)
        and isinstance(item.get("address"), str)
        and all(
            isinstance(item.get(k), int) and not isinstance(item.get(k), bool)
            for k in ("num_requests", "fails")
        )
    ):
        raise FrontdoorError(f"{where}: an upstream line of an unknown shape: {item!r:.120}")
    return UpstreamLoad(item["address"], item["num_requests"], item["fails"])
