"""Off a TTY every progress line is an event with a stable name, fields and a level; under journald
each line carries its `<N>` priority, so `journalctl -p warning` shows failures and rollbacks."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from gates.outcome import Outcome
from launcher.logfacts.events import EventKind, LogEvent
from launcher.supervisor.progress import Progress, configure_logging


@pytest.fixture(autouse=True)
def restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def run_a_rejected_start(progress: Progress) -> None:
    progress.set_phase("loading", candidate="prod@ab")
    progress.on_log_event(LogEvent(EventKind.WEIGHTS_LOADED, "Loading weights took 3.2 s", 40))
    progress.on_gate(0, 2, "health", None)
    progress.on_gate(0, 2, "health", Outcome.passed("/health 200"))
    progress.on_gate(1, 2, "smoke", Outcome.failed("needle: expected ZX-0001-Q"))
    progress.set_phase("serving_last_good", reason="rejected by smoke")
    progress.on_log_event(LogEvent(EventKind.FAILED, "ValueError: Free memory on device", 90))
    progress.set_phase("failed", reason="nothing could be served")


def test_events_have_stable_names_fields_and_levels() -> None:
    with capture_logs() as events:
        run_a_rejected_start(Progress(io.StringIO()))
    seen = [(e["event"], e["log_level"]) for e in events]
    assert seen == [
        ("phase.loading", "info"),
        ("engine.weights_loaded", "info"),
        ("gate.start", "info"),
        ("gate.pass", "info"),
        ("gate.fail", "warning"),
        ("phase.serving_last_good", "warning"),
        ("engine.failed", "error"),
        ("phase.failed", "error"),
    ]
    fail = events[4]
    assert (fail["gate"], fail["index"], fail["total"]) == ("smoke", 2, 2)
    assert fail["summary"] == "needle: expected ZX-0001-Q" and fail["msg"] == "gate 2/2 smoke: fail"
    assert events[6]["log_line"] == "ValueError: Free memory on device"


def test_under_journald_each_line_starts_with_its_priority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal-stream"
    with path.open("w") as stream:
        stat = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{stat.st_dev}:{stat.st_ino}")
        configure_logging(stream)
        run_a_rejected_start(Progress(stream))
    lines = path.read_text().splitlines()
    priorities = [line[: line.index(">") + 1] for line in lines]
    assert priorities == ["<6>", "<6>", "<6>", "<6>", "<4>", "<4>", "<3>", "<3>"]
    # plain `event key=value` text: journald stamps each line itself, so no second timestamp
    assert lines[4].startswith('<4>gate.fail msg="gate 2/2 smoke: fail" phase=loading elapsed_s=')
    assert 'summary="needle: expected ZX-0001-Q" gate=smoke index=2 total=2' in lines[4]
    assert not any("timestamp" in line or "{" in line or "level=" in line for line in lines)


def test_json_in_the_journal_on_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal-stream"
    with path.open("w") as stream:
        stat = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{stat.st_dev}:{stat.st_ino}")
        monkeypatch.setenv("VLLM_GATE_LOG_FORMAT", "json")
        configure_logging(stream)
        run_a_rejected_start(Progress(stream))
    lines = path.read_text().splitlines()
    assert lines[4].startswith("<4>{") and json.loads(lines[4][3:])["event"] == "gate.fail"


def test_text_is_one_line_whatever_the_values_hold() -> None:
    from launcher.supervisor.progress import render_text

    event = {"event": "phase.stopped", "signal": "SIGTERM", "why": 'a "b"\nc=d', "ids": ["x", "y"],
             "ok": True, "n": 3, "timestamp": "T", "level": "info"}  # fmt: skip
    line = render_text(None, "", event)
    assert line == 'phase.stopped signal=SIGTERM why="a \\"b\\"\\nc=d" ids="[\\"x\\", \\"y\\"]" ok=true n=3'
    assert "\n" not in line


def test_a_log_format_that_does_not_exist_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from launcher.errors import BadInput

    monkeypatch.setenv("VLLM_GATE_LOG_FORMAT", "xml")
    with pytest.raises(BadInput, match="VLLM_GATE_LOG_FORMAT='xml' is not a log format"):
        configure_logging(io.StringIO())


def test_a_stream_that_is_not_the_journal_gets_plain_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "1:2")  # inherited, but stderr was redirected elsewhere
    path = tmp_path / "redirected"
    with path.open("w") as stream:
        configure_logging(stream)
        run_a_rejected_start(Progress(stream))
    assert all(line.startswith("{") for line in path.read_text().splitlines())


def test_an_operator_error_under_journald_is_logged_at_priority_err(tmp_path: Path) -> None:
    import subprocess
    import sys

    launch = Path(sys.executable).with_name("launch")
    path = tmp_path / "stderr"
    with path.open("w") as stderr:
        stat = os.fstat(stderr.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"}
        argv = [str(launch), "--state-dir", str(tmp_path), "logs", "../x"]
        code = subprocess.run(argv, stderr=stderr, stdout=subprocess.DEVNULL, env=env, timeout=60).returncode
    assert code == 2
    assert path.read_text().splitlines() == [
        "<3>error: invalid profile name '../x'",
        "<3>hint: use letters, digits, '-', '_' and '.'",
    ]


def test_while_starting_systemd_gets_each_step_as_status_and_more_time(tmp_path: Path) -> None:
    import socket

    from launcher.host.notify import Notifier

    manager = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # what systemd holds
    manager.bind(str(tmp_path / "notify"))
    manager.setblocking(False)
    progress = Progress(io.StringIO(), notifier=Notifier(str(tmp_path / "notify")))
    progress.set_phase("gating", candidate="prod@ab")
    progress.on_gate(1, 4, "graph_capture", None)
    progress.set_phase("serving", fingerprint="ab")
    progress.on_gate(0, 1, "memory_leak", None)  # a check after promotion: READY's status stands
    got = []
    while True:
        try:
            got.append(manager.recv(4096).decode())
        except BlockingIOError:
            break
    manager.close()
    assert got == [  # the phase itself is the supervisor's own STATUS=, not repeated here
        "STATUS=gating: gate 2/4 graph_capture",
        "EXTEND_TIMEOUT_USEC=600000000",
    ]


def test_every_warning_and_error_names_vllms_log_and_nothing_else_does() -> None:
    progress = Progress(io.StringIO())
    progress.engine_log = Path("/state/profiles/prod/logs/engine.log")
    with capture_logs() as events:
        run_a_rejected_start(progress)
    for event in events:
        named = event.get("vllm_log") == "/state/profiles/prod/logs/engine.log"
        assert named == (event["log_level"] in ("warning", "error")), event
    assert any(e["log_level"] == "warning" for e in events) and any(e["log_level"] == "error" for e in events)
