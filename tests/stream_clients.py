"""Clients that keep a server busy as an operator's users do: each streams a chat completion, and
sends the next one as soon as the last ended, until told to stop; every request's outcome is kept.

A request *failed* when it got no 200 (a refused connection, a 503, a reset before any answer); a
stream was *cut* when it began and then ended without its finish (a `finish_reason` of stop or length)
and the `[DONE]` that follows it — mid-answer, as a park's `/sleep?mode=abort` or an engine's stop
leaves it. The longest wait is from a request's send to its first chunk: what holding at a front door
costs a client. Times are for reporting only; tests judge the counts.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import requests

from tests.simserver import HANG_S

BODY: dict[str, Any] = {
    "model": "sim",
    "messages": [{"role": "user", "content": "Tell me about the history of the printing press."}],
    "max_tokens": 48,
    "temperature": 0,
    "stream": True,
}


@dataclass
class Outcome:
    status: int | None = None
    error: str | None = None
    chunks: int = 0
    finish_reason: str | None = None
    done: bool = False
    waited_s: float | None = None  # send → first chunk

    @property
    def failed(self) -> bool:
        return self.status != 200

    @property
    def cut(self) -> bool:
        return not self.failed and not (self.done and self.finish_reason in ("stop", "length"))


@dataclass
class StreamClients:
    url: str
    count: int = 8
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _done_by: dict[int, int] = field(default_factory=dict)  # client -> requests it finished
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __enter__(self) -> StreamClients:
        for index in range(self.count):
            thread = threading.Thread(target=self._client, args=(index,), name=f"client-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(HANG_S)

    def each_finished(self, requests_more: int) -> None:
        """Wait until every client finished `requests_more` more requests than it had now."""
        with self._changed:
            goal = {i: self._done_by.get(i, 0) + requests_more for i in range(self.count)}
            reached = self._changed.wait_for(
                lambda: all(self._done_by.get(i, 0) >= n for i, n in goal.items()), HANG_S
            )
        assert reached, f"the clients stopped getting answers: {self._done_by}"

    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failed]

    def cut(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.cut]

    def longest_wait_s(self) -> float:
        return max((o.waited_s for o in self.outcomes if o.waited_s is not None), default=0.0)

    def _client(self, index: int) -> None:
        with requests.Session() as session:
            while not self._stop.is_set():
                outcome = self._one(session)
                with self._lock:
                    self.outcomes.append(outcome)
                with self._changed:
                    self._done_by[index] = self._done_by.get(index, 0) + 1
                    self._changed.notify_all()

    def _one(self, session: requests.Session) -> Outcome:
        outcome = Outcome()
        sent = time.monotonic()
        try:
            with session.post(
                f"{self.url}/v1/chat/completions", json=BODY, stream=True, timeout=HANG_S
            ) as reply:
                outcome.status = reply.status_code
                if reply.status_code != 200:
                    outcome.error = reply.text[:300]
                    return outcome
                for line in reply.iter_lines():
                    self._read(line, outcome, sent)
        except requests.RequestException as err:
            outcome.error = f"{type(err).__name__}: {err}"
        return outcome

    @staticmethod
    def _read(line: bytes, outcome: Outcome, sent: float) -> None:
        if not line.startswith(b"data:"):
            return
        if outcome.waited_s is None:
            outcome.waited_s = time.monotonic() - sent
        payload = line[5:].strip()
        if payload == b"[DONE]":
            outcome.done = True
            return
        outcome.chunks += 1
        choices = json.loads(payload).get("choices") or [{}]
        outcome.finish_reason = choices[0].get("finish_reason") or outcome.finish_reason
