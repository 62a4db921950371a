"""The front door's addresses, checked before they reach Caddy's config: the admin API's (a unix
socket or a loopback port: whoever reaches it can send every client elsewhere, and Caddy's admin
API has no authentication), the clients' listen address, and an engine's dial.

Each check returns the problem in words (for the profile's findings) or None; the parsers raise
ValueError with the same words.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

LOOPBACK_ADMIN_RE = re.compile(r"\A(?P<host>127\.0\.0\.1|\[::1\]|localhost):(?P<port>[0-9]{1,5})\Z")
# A host name as a dial may carry it: letters, digits, dots and dashes, so never a placeholder
# (`{…}`), a unix path or a second address.
HOSTNAME_RE = re.compile(r"\A[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?\Z")
# sun_path is 108 bytes with its NUL: a longer path cannot be bound (Caddy fails to start).
MAX_SOCKET_PATH_BYTES = 107
# Caddy reads `{…}` as a placeholder (a backslash escapes one), and `PATH|MODE` as a socket with
# its permission bits.
PLACEHOLDER_FORBIDDEN = frozenset("{}\\")
SOCKET_PATH_FORBIDDEN = PLACEHOLDER_FORBIDDEN | {"|"}


@dataclass(frozen=True, slots=True)
class AdminAddress:
    """A unix socket (`socket`), or a loopback `host` and `port`."""

    socket: Path | None = None
    host: str | None = None
    port: int | None = None

    @property
    def caddy_listen(self) -> str:
        """`admin.listen` in Caddy's network-address syntax."""
        return f"unix/{self.socket}" if self.socket is not None else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return str(self.socket) if self.socket is not None else f"{self.host}:{self.port}"


def admin_problem(text: str) -> str | None:
    """Why `text` cannot be the admin API's address, or None."""
    if text.startswith("/"):
        return socket_path_problem(text)
    match = LOOPBACK_ADMIN_RE.match(text)
    if match is None:
        return (
            "an absolute unix socket path, or 127.0.0.1:PORT, [::1]:PORT or localhost:PORT (the admin "
            "API can send every client elsewhere: never on a network interface)"
        )
    if not 1 <= int(match["port"]) <= 65535:
        return f"port {match['port']} is not in 1-65535"
    return None


def parse_admin(text: str) -> AdminAddress:
    problem = admin_problem(text)
    if problem is not None:
        raise ValueError(problem)
    if text.startswith("/"):
        return AdminAddress(socket=Path(text))
    match = LOOPBACK_ADMIN_RE.match(text)
    assert match is not None
    return AdminAddress(host=match["host"], port=int(match["port"]))


def socket_path_problem(path: str) -> str | None:
    """A unix socket path Caddy can bind and read back as one path."""
    problem = _path_problem(path, SOCKET_PATH_FORBIDDEN)
    if problem is None and len(path.encode()) > MAX_SOCKET_PATH_BYTES:
        return f"is {len(path.encode())} bytes long; a unix socket path holds at most {MAX_SOCKET_PATH_BYTES}"
    return problem


def file_placeholder_problem(path: str) -> str | None:
    """A file Caddy reads through `{file.PATH}`: the path must end where the placeholder does."""
    return _path_problem(path, PLACEHOLDER_FORBIDDEN)


def _path_problem(path: str, forbidden: frozenset[str]) -> str | None:
    if not path.startswith("/"):
        return "must be an absolute path"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "contains a control character"
    bad = sorted(forbidden & set(path))
    if bad:
        return f"contains {' '.join(bad)}, which Caddy would read as more than a path"
    return None


def listen_host_problem(host: str) -> str | None:
    """The clients' address: an IP address or `localhost` (a name would be resolved by Caddy at bind)."""
    if host == "localhost":
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "an IP address (0.0.0.0 or :: for every interface) or localhost"
    return None


def host_port(host: str, port: int) -> str:
    """`host:port`, an IPv6 address in brackets: Caddy's and HTTP's form."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def engine_dial(host: str, port: int) -> str:
    """Where the door reaches an engine that binds `host`: an engine on every interface is reached
    on loopback."""
    reach = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return host_port(reach, port)


def dial_problem(dial: str) -> str | None:
    """A dial the door may be pointed at: `HOST:PORT`, HOST an IP address or a plain host name."""
    host, sep, port = dial.rpartition(":")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"{dial!r} is not HOST:PORT with a port in 1-65535"
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"{dial!r}: {host!r} is not an IPv6 address"
        return None
    if HOSTNAME_RE.match(host) is None:
        return f"{dial!r}: {host!r} is not an IP address or a host name"
    return None
