"""The tool_call gate sends its independent cases at once: it costs one round trip, not five."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gates.context import HttpReply
from gates.outcome import Verdict
from gates.tool_call import ToolCallGate
from gates.tool_cases import CASES
from tests.doubles import FakeClock, ScriptedLog, make_context

CALL = {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}


@dataclass
class RendezvousHttp:
    """Answers a chat request only once `expected` requests are in flight together (a barrier with a
    deadline): cases sent one after another break the barrier and come back as no connection."""

    expected: int
    barrier: threading.Barrier = field(init=False)
    threads: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(self.expected, timeout=10.0)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        return HttpReply(200, json.dumps({"data": [{"id": "sim"}]}))

    def _meet(self) -> bool:
        self.threads.add(threading.current_thread().name)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            return False
        return True

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        if not self._meet():
            return HttpReply(0, "", "the other cases were not in flight")
        if body["tool_choice"] == "auto" and "No tool" in body["messages"][0]["content"]:
            message: dict[str, Any] = {"content": "Hello!"}
        else:
            message = {"content": None, "tool_calls": [{"function": CALL}]}
        return HttpReply(200, json.dumps({"choices": [{"message": message, "finish_reason": "stop"}]}))

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        if not self._meet():
            return
        yield json.dumps({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": CALL}]}}]})
        yield json.dumps({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
        yield "[DONE]"


def _check(gate: ToolCallGate, http: RendezvousHttp) -> Any:
    clock = FakeClock()
    ctx = make_context(ScriptedLog(clock), clock)
    return gate.check(dataclasses.replace(ctx, http=http))


def test_all_five_cases_are_in_flight_at_once_and_reported_in_order() -> None:
    http = RendezvousHttp(expected=len(CASES))
    outcome = _check(ToolCallGate(), http)
    assert outcome.verdict is Verdict.PASS, outcome.summary
    assert list(outcome.evidence["cases"]) == [case.name for case in CASES]
    assert len(http.threads) == len(CASES)


def test_a_subset_of_cases_runs_together_too() -> None:
    http = RendezvousHttp(expected=2)
    outcome = _check(ToolCallGate({"cases": ["no_tool", "auto"]}), http)
    assert outcome.verdict is Verdict.PASS, outcome.summary
    assert list(outcome.evidence["cases"]) == ["auto", "no_tool"]
