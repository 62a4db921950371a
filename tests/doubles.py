"""Small hand-written test doubles for the gates' interfaces: they record, they do not mock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from basis.clock import Waitable
from gates.context import Expectations, GateContext, HttpReply


@dataclass
class FakeClock:
    """basis.clock.Clock on a fake time line: a sleep, or a wait on an event that is not set, moves
    `now` by its length at once; nothing sleeps. `epoch` is the wall clock at `now` = 0."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)
    epoch: float = 1_790_000_000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.epoch + self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)

    def wait(self, event: Waitable, timeout_s: float | None) -> bool:
        if event.is_set():
            return True
        if timeout_s is None:
            raise AssertionError("an unbounded wait on a fake clock would never end")
        self.sleep(timeout_s)
        return event.is_set()


@dataclass
class ScriptedLog:
    """Facts and lines that change as the clock moves: `script` maps a time offset to an update."""

    clock: FakeClock
    current_facts: dict[str, Any] = field(default_factory=dict)
    current_lines: list[str] = field(default_factory=list)
    script: list[tuple[float, dict[str, Any], list[str]]] = field(default_factory=list)
    start: float = 1000.0

    def _advance(self) -> None:
        while self.script and self.clock.now - self.start >= self.script[0][0]:
            _, facts, lines = self.script.pop(0)
            self.current_facts.update(facts)
            self.current_lines.extend(lines)

    def facts(self) -> Mapping[str, Any]:
        self._advance()
        return self.current_facts

    def lines(self) -> Sequence[str]:
        self._advance()
        return self.current_lines

    def lines_since(self, position: int) -> tuple[Sequence[str], int]:
        self._advance()
        return self.current_lines[position:], len(self.current_lines)

    def wait_for_change(self, timeout_s: float) -> None:
        self.clock.sleep(timeout_s)


@dataclass
class FakeServer:
    died: str | None = None

    def alive(self) -> bool:
        return self.died is None

    def exit_description(self) -> str | None:
        return self.died

    def process_tree(self) -> Sequence[int]:
        return [1]


class NoHttp:
    def get(self, path: str, timeout_s: float) -> HttpReply:
        return HttpReply(0, "", "no server in this test")

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        return HttpReply(0, "", "no server in this test")

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        return iter(())


class NoMemory:
    def rss_bytes(self, pids: Sequence[int]) -> int:
        return 0

    def gpu_bytes(self, pids: Sequence[int]) -> int | None:
        return None


def make_context(
    log: ScriptedLog, clock: FakeClock, expect: Expectations | None = None, server: FakeServer | None = None
) -> GateContext:
    return GateContext(
        clock=clock,
        http=NoHttp(),
        log=log,
        server=server or FakeServer(),
        memory=NoMemory(),
        expect=expect or Expectations(served_model_names=("m",), capture_sizes=(1, 2, 4, 8), max_num_seqs=32),
    )
