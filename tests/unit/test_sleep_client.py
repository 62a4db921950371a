"""vLLM's sleep routes as the launcher speaks them (launcher/supervisor/sleep.py `VllmSleep`), on a
fake clock: a prefix-cache reset that answers `success: false` while requests still hold blocks is
retried until its deadline (vLLM's docstring: callers may retry), never taken for a failed wake."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gates.context import HttpReply
from launcher.supervisor.sleep import RESET_RETRY_S, VllmSleep
from tests.doubles import FakeClock
from tests.supervisor_rig import Rig


@dataclass
class Routes:
    """Answers each POST from `replies` in turn (the last one for ever after); keeps what was asked."""

    replies: list[HttpReply]
    get_reply: HttpReply = field(default_factory=lambda: HttpReply(200, '{"is_sleeping": true}'))
    asked: list[tuple[str, float]] = field(default_factory=list)

    def get(self, path: str, timeout_s: float) -> HttpReply:
        self.asked.append((path, timeout_s))
        return self.get_reply

    def post_json(self, path: str, body: Mapping[str, Any], timeout_s: float) -> HttpReply:
        self.asked.append((path, timeout_s))
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def post_sse(self, path: str, body: Mapping[str, Any], timeout_s: float) -> Iterator[str]:
        return iter(())


HELD = HttpReply(200, '{"success": false}')
DONE = HttpReply(200, '{"success": true}')


def client(tmp_path: Path, routes: Routes, clock: FakeClock) -> VllmSleep:
    return VllmSleep(Rig(tmp_path).candidate(), clock, http=routes)


def test_a_reset_refused_while_blocks_are_held_is_retried_until_it_succeeds(tmp_path: Path) -> None:
    clock = FakeClock()
    routes = Routes([HELD, HELD, HELD, DONE])
    assert client(tmp_path, routes, clock).reset_prefix_cache(10.0) is None
    assert [path for path, _ in routes.asked] == ["/reset_prefix_cache"] * 4
    assert clock.slept == [RESET_RETRY_S] * 3


def test_a_reset_that_never_succeeds_fails_at_its_deadline_with_vllm_s_answer(tmp_path: Path) -> None:
    clock = FakeClock()
    routes = Routes([HELD])
    why = client(tmp_path, routes, clock).reset_prefix_cache(2.0)
    assert why == '/reset_prefix_cache answered 200: {"success": false} (for 2 s)'
    assert sum(clock.slept) <= 2.0 and len(routes.asked) == 10  # 0.2 s apart, within the 2 s
    assert all(timeout > 0 for _, timeout in routes.asked)  # each try gets what is left of the deadline


def test_a_reset_that_answers_no_json_is_retried_like_a_refusal(tmp_path: Path) -> None:
    clock = FakeClock()
    routes = Routes([HttpReply(500, "Internal Server Error"), DONE])
    assert client(tmp_path, routes, clock).reset_prefix_cache(5.0) is None
    assert len(routes.asked) == 2


def test_sleep_and_wake_say_why_they_failed(tmp_path: Path) -> None:
    clock = FakeClock()
    gone = Routes([HttpReply(0, "", "read timed out", timed_out=True)])
    assert client(tmp_path, gone, clock).sleep(120.0) == "POST /sleep?level=1: no answer within 120 s"
    refused = Routes([HttpReply(404, '{"detail":"Not Found"}')])
    assert client(tmp_path, refused, clock).wake(5.0) == 'POST /wake_up answered 404: {"detail":"Not Found"}'
    assert client(tmp_path, Routes([HttpReply(200, "")]), clock).wake(5.0) is None


def test_is_sleeping_reads_only_a_boolean(tmp_path: Path) -> None:
    clock = FakeClock()
    routes = Routes([DONE])
    sleeper = client(tmp_path, routes, clock)
    assert sleeper.is_sleeping(5.0) is True
    routes.get_reply = HttpReply(200, '{"is_sleeping": "yes"}')
    assert sleeper.is_sleeping(5.0) is None
    routes.get_reply = HttpReply(200, "not json")
    assert sleeper.is_sleeping(5.0) is None
    routes.get_reply = HttpReply(503, "")
    assert sleeper.is_sleeping(5.0) is None
