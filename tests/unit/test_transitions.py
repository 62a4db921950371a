"""The one transition point writes the history, the status, the progress line and systemd
together, in that order: a poller that sees the new phase finds its record, and systemd hears
READY=1 only once the status says serving."""

from __future__ import annotations

import io
import json
from pathlib import Path

from launcher.supervisor.history import Event, History
from launcher.supervisor.progress import Progress
from launcher.supervisor.status import Phase, StatusBoard, Transitions


class Order(list[str]):
    """Each seam appends its name (and what it was given) when it is written."""


class Line(io.StringIO):
    def __init__(self, order: Order) -> None:
        super().__init__()
        self.order = order

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text.strip():
            self.order.append(f"progress {text.split(':', 1)[-1].strip()}")
        return len(text)


class Systemd:
    def __init__(self, order: Order) -> None:
        self.order = order

    def ready(self, status: str) -> None:
        self.order.append(f"READY=1 {status}")

    def status(self, text: str) -> None:
        self.order.append(f"STATUS={text}")

    def reloading(self) -> None: ...

    def stopping(self) -> None: ...

    def watchdog(self) -> None: ...

    def extend_timeout(self, seconds: float) -> None: ...


def transitions(tmp_path: Path, order: Order) -> Transitions:
    history = History(
        tmp_path / "h.jsonl", write=lambda _, line: order.append(f"history {json.loads(line)['event']}")
    )
    board = StatusBoard(
        tmp_path / "s.json", "svc", write=lambda _, text: order.append(f"status {json.loads(text)['phase']}")
    )
    return Transitions("svc", board, history, Progress(Line(order)), Systemd(order))


def test_a_promotion_reaches_history_status_progress_then_systemd(tmp_path: Path) -> None:
    order = Order()
    t = transitions(tmp_path, order)
    t.record(
        Event.PROMOTED, phase=Phase.SERVING, status={"detail": "c"}, show={}, tell="up", ready="serving c"
    )
    assert order == [
        "history promoted",
        "status serving",
        "progress phase serving",
        "STATUS=up",
        "READY=1 serving c",
    ]
    assert t.board.current.phase == "serving" and t.board.current.detail == "c"


def test_only_what_a_transition_names_is_written(tmp_path: Path) -> None:
    order = Order()
    t = transitions(tmp_path, order)
    t.record(Event.ENGINE_STOPPED, why="reload")  # a record, no phase
    t.record(phase=Phase.GATING, show={})  # a phase, no record
    t.record(status={"reload_seq": 1})
    assert order == ["history engine_stopped", "status gating", "progress phase gating", "status gating"]
    assert t.board.current.reload_seq == 1
