"""Wait until an engine has no request in flight through the front door, or a deadline passes:
what the launcher does between pointing the door elsewhere and parking or stopping that engine,
so a client's stream is not cut in the middle.

Point the door away first (`FrontdoorAdmin.point_at`): a drain of the engine that still receives
new requests only ends at its deadline. Time is read only through the `Clock` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from basis.clock import Clock
from launcher.frontdoor.admin import FrontdoorError

POLL_S = 0.2


class InFlight(Protocol):
    """What a drain reads: requests in flight per engine dial (FrontdoorAdmin)."""

    def in_flight(self) -> dict[str, int]: ...


@dataclass(frozen=True, slots=True)
class Drained:
    """How a drain ended. `in_flight` 0: nothing left; N: N requests still in flight at the
    deadline; None: the door did not answer (`problem` says why), so nothing is known."""

    dial: str
    in_flight: int | None
    waited_s: float
    problem: str | None = None

    @property
    def complete(self) -> bool:
        return self.in_flight == 0


def drain(door: InFlight, dial: str, clock: Clock, timeout_s: float, *, poll_s: float = POLL_S) -> Drained:
    """Poll the door until `dial` has nothing in flight or `timeout_s` has passed. A door that does
    not answer ends the drain at once: a stopped door carries no request, and a broken one cannot
    tell when its requests are done."""
    start = clock.monotonic()
    deadline = start + timeout_s
    while True:
        try:
            count = door.in_flight().get(dial, 0)
        except FrontdoorError as err:
            return Drained(dial, None, clock.monotonic() - start, str(err))
        now = clock.monotonic()
        if count == 0 or now >= deadline:
            return Drained(dial, count, now - start)
        clock.sleep(min(poll_s, deadline - now))
