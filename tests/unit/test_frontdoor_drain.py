"""The drain: wait until an engine has nothing in flight through the door, or its deadline; time
only through the clock passed in (a fake one here), what is in flight through a small fake door."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from launcher.frontdoor.admin import FrontdoorError
from launcher.frontdoor.drain import drain
from tests.doubles import FakeClock

ENGINE = "127.0.0.1:8000"
OTHER = "127.0.0.1:8001"


@dataclass
class ScriptedDoor:
    """Answers `in_flight()` from a script, one entry per call (the last one repeats); an exception
    in the script is raised. Records when (on the clock) it was asked."""

    clock: FakeClock
    script: list[dict[str, int] | Exception]
    asked_at: list[float] = field(default_factory=list)

    def in_flight(self) -> dict[str, int]:
        self.asked_at.append(self.clock.now)
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)


def test_it_ends_when_the_engine_has_nothing_in_flight() -> None:
    clock = FakeClock()
    door = ScriptedDoor(clock, [{ENGINE: 3}, {ENGINE: 2, OTHER: 5}, {ENGINE: 1}, {OTHER: 4}])
    drained = drain(door, ENGINE, clock, timeout_s=60, poll_s=0.5)
    assert (drained.complete, drained.in_flight, drained.problem) == (True, 0, None)
    assert drained.waited_s == pytest.approx(1.5)  # three polls of 0.5 s on the fake clock
    assert clock.slept == [0.5, 0.5, 0.5]
    assert len(door.asked_at) == 4


def test_nothing_in_flight_at_first_waits_not_at_all() -> None:
    clock = FakeClock()
    drained = drain(ScriptedDoor(clock, [{OTHER: 9}]), ENGINE, clock, timeout_s=60)
    assert drained.complete and drained.waited_s == 0 and clock.slept == []


def test_at_the_deadline_it_returns_what_is_still_in_flight() -> None:
    clock = FakeClock()
    door = ScriptedDoor(clock, [{ENGINE: 2}])
    drained = drain(door, ENGINE, clock, timeout_s=1.0, poll_s=0.3)
    assert (drained.complete, drained.in_flight) == (False, 2)
    assert drained.waited_s == pytest.approx(1.0)
    assert clock.slept == pytest.approx([0.3, 0.3, 0.3, 0.1])  # the last sleep ends at the deadline
    assert door.asked_at[-1] == pytest.approx(1001.0)  # asked once more at the deadline itself


def test_a_door_that_does_not_answer_ends_the_drain_at_once_with_why() -> None:
    clock = FakeClock()
    door = ScriptedDoor(clock, [{ENGINE: 1}, FrontdoorError("the front door's admin API did not answer")])
    drained = drain(door, ENGINE, clock, timeout_s=60, poll_s=0.2)
    assert (drained.complete, drained.in_flight) == (False, None)
    assert drained.problem == "the front door's admin API did not answer"
    assert clock.slept == [0.2]


def test_a_zero_deadline_asks_once() -> None:
    clock = FakeClock()
    door = ScriptedDoor(clock, [{ENGINE: 1}])
    drained = drain(door, ENGINE, clock, timeout_s=0)
    assert (drained.in_flight, clock.slept, len(door.asked_at)) == (1, [], 1)
