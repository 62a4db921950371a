"""sd_notify spoken directly: one datagram per message to `$NOTIFY_SOCKET`, no libsystemd needed.

The unit is `Type=notify`: systemd counts the service as started only at READY=1 (after the gates
passed), shows STATUS= in `systemctl status`, and restarts it when WATCHDOG=1 stops coming. Without
NOTIFY_SOCKET (not under systemd) every call is a no-op that returns False.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

import structlog

log = structlog.get_logger(__name__)


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """systemd's WatchdogSec= for this process (WATCHDOG_USEC, honouring WATCHDOG_PID), or None.

    Ping at half of it, as sd_watchdog_enabled(3) advises.
    """
    environ = os.environ if environ is None else environ
    usec = environ.get("WATCHDOG_USEC", "")
    pid = environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 1_000_000


class Notifier:
    """Messages to the service manager. Opens a socket per message: nothing to start or close."""

    def __init__(self, socket_path: str | None) -> None:
        self.socket_path = socket_path or None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        environ = os.environ if environ is None else environ
        return cls(environ.get("NOTIFY_SOCKET"))

    @property
    def enabled(self) -> bool:
        return self.socket_path is not None

    def ready(self, status: str | None = None) -> bool:
        return self.send(READY="1", STATUS=status)

    def status(self, text: str) -> bool:
        return self.send(STATUS=text)

    def reloading(self, status: str | None = None) -> bool:
        # MONOTONIC_USEC lets systemd (253+) match this reload to the SIGHUP that asked for it.
        return self.send(
            RELOADING="1",
            MONOTONIC_USEC=str(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000),
            STATUS=status,
        )

    def stopping(self, status: str | None = None) -> bool:
        return self.send(STOPPING="1", STATUS=status)

    def watchdog(self) -> bool:
        return self.send(WATCHDOG="1")

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for `seconds` more before TimeoutStartSec/TimeoutStopSec fires (startup making progress)."""
        return self.send(EXTEND_TIMEOUT_USEC=str(int(seconds * 1_000_000)))

    def send(self, **fields: str | None) -> bool:
        """Send `NAME=value` lines (None values left out); True when the datagram went out."""
        lines = [f"{name}={_one_line(value)}" for name, value in fields.items() if value is not None]
        if self.socket_path is None or not lines:
            return False
        address = "\0" + self.socket_path[1:] if self.socket_path.startswith("@") else self.socket_path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto("\n".join(lines).encode(), address)
        except OSError as err:
            log.warning("sd_notify failed", socket=self.socket_path, error=str(err), message=lines[0])
            return False
        return True


def _one_line(value: str) -> str:
    return " ".join(value.split("\n"))
