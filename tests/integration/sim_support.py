"""Helpers for the simulator's real-process tests: a stream read in the background, /metrics
values, the engine core's process, signals that are always undone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
import requests

from tests.simserver import SimHandle, titled


def chat(sim: SimHandle, text: str, timeout_s: float = 30.0, **extra: Any) -> requests.Response:
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0, **extra}
    return requests.post(sim.url + "/v1/chat/completions", json=body, timeout=timeout_s)


def answer(sim: SimHandle, text: str, **extra: Any) -> str:
    response = chat(sim, text, **extra)
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def metric(sim: SimHandle, name: str, labels: str = "") -> float:
    """One sample of /metrics: `name{...labels...}` (the first whose labels contain `labels`)."""
    text = requests.get(sim.url + "/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in /metrics")


def published(sim: SimHandle, names: tuple[str, ...]) -> dict[str, float]:
    """The families `names` of one /metrics page (one moment of the server), each summed over its
    labels (e.g. `vllm:request_success_total` over its finish reasons)."""
    found = dict.fromkeys(names, 0.0)
    for line in requests.get(sim.url + "/metrics", timeout=10).text.splitlines():
        name = line.split("{", 1)[0]
        if name in found:
            found[name] += float(line.rsplit(" ", 1)[1])
    return found


def health(sim: SimHandle) -> int:
    return requests.get(sim.url + "/health", timeout=10).status_code


def engine_core(sim: SimHandle) -> psutil.Process:
    found = titled(sim, "VLLM::EngineCore")
    assert found, "no VLLM::EngineCore process"
    return found[0]


def wait_status(proc: psutil.Process, status: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while proc.status() != status:
        assert time.monotonic() < deadline, f"{proc.pid} never became {status}"
        time.sleep(0.005)


@contextlib.contextmanager
def stopped(proc: psutil.Process) -> Iterator[None]:
    """SIGSTOP for the block's length; SIGCONT however it ends."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        wait_status(proc, psutil.STATUS_STOPPED)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)


@dataclass(eq=False)
class Stream:
    """A streaming request read in a background thread: its SSE events as they arrive."""

    sim: SimHandle
    body: dict[str, Any]
    path: str = "/v1/chat/completions"
    events: list[str] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() as each event was read
    cond: threading.Condition = field(default_factory=threading.Condition)
    head: threading.Event = field(default_factory=threading.Event)  # the status line and headers came
    done: threading.Event = field(default_factory=threading.Event)
    status: int | None = None
    error: BaseException | None = None

    def start(self) -> Stream:
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        try:
            with requests.post(self.sim.url + self.path, json={**self.body, "stream": True}, stream=True,
                               timeout=120) as response:  # fmt: skip
                self.status = response.status_code
                self.head.set()
                for line in response.iter_lines():
                    if line.startswith(b"data: "):
                        with self.cond:
                            self.events.append(line[6:].decode())
                            self.arrivals.append(time.monotonic())
                            self.cond.notify_all()
        except BaseException as err:  # noqa: BLE001 - reported to the test through `error`
            self.error = err
        finally:
            self.done.set()
            with self.cond:
                self.cond.notify_all()

    def wait_events(self, count: int, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while len(self.events) < count and not self.done.is_set():
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.events)} of {count} events: {self.events[-3:]}"
                self.cond.wait(left)
        assert len(self.events) >= count, (self.events, self.error)

    def wait_head(self, timeout_s: float = 20.0) -> None:
        """Until the response's head came: the server took the request (a chat stream's first
        event comes only with the engine's first output, as in vLLM)."""
        assert self.head.wait(timeout_s) or self.done.is_set(), "no response head"
        assert self.error is None and self.status == 200, (self.status, self.error)

    def finish(self, timeout_s: float = 30.0) -> list[str]:
        assert self.done.wait(timeout_s), f"the stream did not end: {self.events[-3:]}"
        assert self.error is None, self.error
        return list(self.events)

    def chunks(self) -> list[dict[str, Any]]:
        return [json.loads(e) for e in self.events if e != "[DONE]"]

    def text(self) -> str:
        out = []
        for chunk in self.chunks():
            for choice in chunk.get("choices", []):
                out.append(choice.get("delta", {}).get("content") or choice.get("text") or "")
        return "".join(out)


def log_line(sim: SimHandle, pattern: str, timeout_s: float = 10.0) -> re.Match[str]:
    """The first log line matching `pattern` (a regex), waited for."""
    deadline = time.monotonic() + timeout_s
    regex = re.compile(pattern)
    while True:
        for line in list(sim.tail.lines):
            if found := regex.search(line):
                return found
        assert time.monotonic() < deadline, f"no log line matches {pattern!r}"
        with sim.tail.cond:
            sim.tail.cond.wait(0.05)
