"""systemd's watchdog: WATCHDOG=1 every WatchdogSec/2, and only while /health answers 200 — a
hung server stops the pings, and systemd restarts the unit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from launcher.host.notify import watchdog_interval_s
from launcher.supervisor.adapters import RequestsHttp
from launcher.supervisor.candidate import Candidate
from launcher.supervisor.notify_port import Notifier

IDLE_TICK_S = 3600.0


class Watchdog:
    def __init__(self, notifier: Notifier) -> None:
        interval = watchdog_interval_s()
        self.notifier = notifier
        self.tick_s = interval / 2 if interval else IDLE_TICK_S
        self.enabled = interval is not None
        self._next = time.monotonic()

    def maybe_ping(self, candidate: Candidate) -> bool:
        if not self.enabled or time.monotonic() < self._next:
            return False
        self._next = time.monotonic() + self.tick_s
        http = RequestsHttp(candidate.base_url, candidate.api_key())
        try:
            healthy = http.get("/health", timeout_s=min(5.0, self.tick_s)).status == 200
        finally:
            http.close()
        if healthy:
            self.notifier.watchdog()
        return healthy

    @contextmanager
    def keepalive(self) -> Iterator[None]:
        """Ping unconditionally while a reload or rollback works (the server is down on purpose;
        the gates have their own deadlines), so systemd does not kill a launcher doing its job."""
        if not self.enabled:
            yield
            return
        done = threading.Event()

        def ping() -> None:
            while not done.wait(self.tick_s):
                self.notifier.watchdog()

        thread = threading.Thread(target=ping, name="watchdog-keepalive", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=1.0)
