"""systemd's watchdog: WATCHDOG=1 every WatchdogSec/2, and only while the serving watch says the
server serves (launcher/watch/; without a watch, while /health answers 200) — a wedged or failing
server stops the pings, and systemd restarts the unit. `/health` alone was not enough: vLLM answers
it 200 while its engine core is stopped and while every request fails."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.host.adapters import RequestsHttp
from launcher.host.notify import watchdog_interval_s
from launcher.profile.candidate import Candidate
from launcher.supervisor.seams import Notifier

IDLE_TICK_S = 3600.0


class Watchdog:
    def __init__(self, notifier: Notifier, clock: Clock = SYSTEM_CLOCK) -> None:
        interval = watchdog_interval_s()
        self.notifier = notifier
        self.clock = clock
        self.tick_s = interval / 2 if interval else IDLE_TICK_S
        self.enabled = interval is not None
        self._next = clock.monotonic()

    def maybe_ping(self, candidate: Candidate, serves: Callable[[], bool] | None = None) -> bool:
        """`serves`: the watch's verdict; None where no watch runs (then /health decides)."""
        if not self.enabled or self.clock.monotonic() < self._next:
            return False
        self._next = self.clock.monotonic() + self.tick_s
        healthy = serves() if serves is not None else self._health(candidate)
        if healthy:
            self.notifier.watchdog()
        return healthy

    def _health(self, candidate: Candidate) -> bool:
        http = RequestsHttp(candidate.base_url, candidate.api_key())
        try:
            return http.get("/health", timeout_s=min(5.0, self.tick_s)).status == 200
        finally:
            http.close()

    @contextmanager
    def keepalive(self) -> Iterator[None]:
        """Ping unconditionally while a reload or rollback works (the server is down on purpose;
        the gates have their own deadlines), so systemd does not kill a launcher doing its job."""
        if not self.enabled:
            yield
            return
        done = threading.Event()

        def ping() -> None:
            while not self.clock.wait(done, self.tick_s):
                self.notifier.watchdog()

        thread = threading.Thread(target=ping, name="watchdog-keepalive", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=1.0)
