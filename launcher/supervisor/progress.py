"""What the operator sees while the launcher works: one updating progress line on a TTY (phase,
graph capture i/N, gate k/N, elapsed), structured events (structlog) everywhere else.

How the events look on stderr: a console line on a TTY; in systemd's journal, plain
`event key=value` text (journald stamps and prioritises each line itself, so JSON with a second
timestamp only made `journalctl -u` harder to read), each line prefixed with its `<N>` priority;
JSON lines anywhere else, for collectors. `VLLM_GATE_LOG_FORMAT` (`text`, `json`, `console`) asks
for one of them wherever stderr goes. Each event name has one level (`EVENT_LEVELS`), so
`journalctl -p warning` shows exactly the gate failures, the rollbacks and everything worse.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

import structlog

from basis.clock import SYSTEM_CLOCK, Clock
from gates.outcome import Outcome
from launcher.errors import BadInput
from launcher.logfacts.events import EventKind, LogEvent
from launcher.supervisor.seams import Notifier
from launcher.supervisor.status import Phase
from launcher.terminal import colour_allowed, is_journal

FORMAT_ENV = "VLLM_GATE_LOG_FORMAT"


class LogFormat(StrEnum):
    CONSOLE = "console"
    TEXT = "text"
    JSON = "json"


def chosen_format(stream: TextIO) -> LogFormat:
    """`$VLLM_GATE_LOG_FORMAT` when set; else console on a TTY, text in the journal, JSON elsewhere."""
    asked = os.environ.get(FORMAT_ENV, "").strip()
    if asked:
        try:
            return LogFormat(asked.lower())
        except ValueError:
            names = ", ".join(f.value for f in LogFormat)
            raise BadInput(
                f"{FORMAT_ENV}={asked!r} is not a log format",
                hint=f"use one of {names}, or unset it to choose by where stderr goes",
            ) from None
    if stream.isatty():
        return LogFormat.CONSOLE
    return LogFormat.TEXT if is_journal(stream) else LogFormat.JSON


def live_line_wanted(stream: TextIO) -> bool:
    """The one updating progress line: on a TTY, unless events were asked for (`text`, `json`)."""
    return stream.isatty() and os.environ.get(FORMAT_ENV, "").strip().lower() in ("", LogFormat.CONSOLE)


# What the journal records of each line already: its time and its priority (the `<N>` prefix).
_JOURNAL_KNOWS = ("timestamp", "level", "event")
_BARE = re.compile(r"[^\s\"'=\\\x00-\x1f\x7f]+")


def render_text(logger: Any, name: str, event_dict: Mapping[str, Any]) -> str:
    """`gate.fail msg="gate 2/4 graph_capture: fail" phase=gating gate=graph_capture …`: one line
    whatever the values hold (control characters and quotes escaped as JSON escapes them)."""
    fields = " ".join(
        f"{key}={_value(value)}" for key, value in event_dict.items() if key not in _JOURNAL_KNOWS
    )
    event = _value(event_dict.get("event", "message"))
    return f"{event} {fields}" if fields else event


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    )
    return text if _BARE.fullmatch(text) else json.dumps(text, ensure_ascii=False)


log = structlog.get_logger("vllm-gate")

SHOWN_EVENTS = {
    EventKind.LOADING_WEIGHTS: "loading weights",
    EventKind.WEIGHTS_LOADED: "weights loaded",
    EventKind.PROFILING: "profiling memory",
    EventKind.KV_CACHE_SIZED: "KV cache sized",
    EventKind.CAPTURING_GRAPHS: "capturing graphs",
    EventKind.ENGINE_INITIALIZED: "engine initialized",
    EventKind.READY: "server ready",
    EventKind.FAILED: "startup failed",
}


# The one mapping from event name to level (journald priority): `journalctl -p warning` shows
# exactly the gate failures, the rollbacks and everything worse. Names not listed are info.
EVENT_LEVELS = {
    "gate.fail": "warning",
    "gate.error": "error",
    "phase.serving_last_good": "warning",  # rolled back: the candidate was rejected
    "phase.failed": "error",  # refused, or nothing could be served
    "engine.failed": "error",  # vLLM's startup died
    "engine.engine_died": "error",
    "watch.degraded": "warning",  # the serving watch (launcher/watch/): a check failed, retried
    "watch.wedged": "error",
    "watch.failing": "error",
    "watch.starving": "error",
    "watch.incident_failed": "warning",
    "park.skipped": "warning",  # the serving engine is stopped, not parked (supervisor/park.py)
    "park.wake_failed": "error",
    "park.switch_failed": "warning",
    "launcher.reload_refused": "warning",  # the change was refused; what served serves on
    "state.status_unwritable": "error",  # status.json cannot be written: `launch status` says unknown
}
SYSLOG_PRIORITY = {"debug": 7, "info": 6, "warning": 4, "error": 3, "critical": 2}


_LEVEL_NUMBERS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def level_of(event: str) -> str:
    return EVENT_LEVELS.get(event, "info")


def journal_prefixed(renderer: Any, stream: TextIO) -> Any:
    """Prefix each rendered line with journald's `<N>` priority when `stream` is the journal's
    (systemd sets JOURNAL_STREAM to its `device:inode`; a redirected stderr is not the journal)."""
    if not is_journal(stream):
        return renderer

    def render(logger: Any, name: str, event_dict: Any) -> str:
        priority = SYSLOG_PRIORITY.get(str(event_dict.get("level")), 6)
        return f"<{priority}>" + str(renderer(logger, name, event_dict))

    return render


def configure_logging(stream: TextIO = sys.stderr) -> None:
    """structlog: console renderer on a TTY, `event key=value` text in the journal (with its `<N>`
    priority), JSON lines otherwise; or what `VLLM_GATE_LOG_FORMAT` asks for (`chosen_format`)."""
    chosen = chosen_format(stream)
    renderer: Any
    if chosen is LogFormat.CONSOLE:
        renderer = structlog.dev.ConsoleRenderer(colors=colour_allowed() and stream.isatty())
    elif chosen is LogFormat.TEXT:
        renderer = journal_prefixed(render_text, stream)
    else:
        renderer = journal_prefixed(structlog.processors.JSONRenderer(), stream)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


# While a start is under way every progress line also goes to systemd: STATUS= (what
# `systemctl status` shows) and EXTEND_TIMEOUT_USEC= (a start that keeps making progress may run
# past TimeoutStartSec; one silent for this long after it is still stopped). Once serving, the
# supervisor's own READY/STATUS stand.
EXTEND_WHILE_STARTING_S = 600.0
STARTING_PHASES = frozenset({Phase.STARTING, Phase.GATING, Phase.ROLLING_BACK})


class Progress:
    def __init__(
        self, stream: TextIO = sys.stderr, notifier: Notifier | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.stream = stream
        self.notifier = notifier
        self.clock = clock
        self.tty = live_line_wanted(stream)
        self.started = clock.monotonic()
        self.phase = "starting"
        self.step = ""
        self._lock = threading.Lock()
        self.engine_log: Path | None = None  # named on every warning and error: where vLLM said why
        # Who else reads each line as it comes: a reload's requesters (`launch set --apply`,
        # `launch rollback`) through their progress files, for as long as the reload runs.
        self.mirror: Callable[[dict[str, Any]], None] | None = None

    def set_phase(self, phase: str, **fields: Any) -> None:
        self.phase = phase
        self.step = ""
        self._show(f"phase {phase}", event=f"phase.{phase}", **fields)

    def on_log_event(self, event: LogEvent) -> None:
        label = SHOWN_EVENTS.get(event.kind)
        if label is None:
            return
        detail = dict(event.detail)
        transient = False
        if event.kind is EventKind.CAPTURING_GRAPHS and "n" in detail:
            done = detail["n"] == detail.get("total")
            label = f"{detail.get('desc') or 'capturing graphs'} {detail['n']}/{detail.get('total', '?')}"
            transient = not done
            if transient and not self.tty:
                return  # JSON logs get each bar's end, not every redraw
        if label == self.step:
            return
        self.step = label
        self._show(
            label,
            transient=transient,
            event=f"engine.{event.kind}",
            log_line=event.line if event.kind is EventKind.FAILED else None,
        )

    def on_gate(self, index: int, total: int, name: str, outcome: Outcome | None) -> None:
        where: dict[str, Any] = {"gate": name, "index": index + 1, "total": total}
        if outcome is None:
            self.step = f"gate {index + 1}/{total} {name}"
            self._show(self.step, event="gate.start", **where)
        else:
            text = f"gate {index + 1}/{total} {name}: {outcome.verdict}"
            self._show(text, event=f"gate.{outcome.verdict}", summary=outcome.summary, **where)

    def message(self, text: str, **fields: Any) -> None:
        self._show(text, **fields)

    def _show(self, text: str, transient: bool = False, event: str = "message", **fields: Any) -> None:
        """One line on a TTY; else one event: a stable name, its level, its fields, the text in `msg`."""
        elapsed = self.clock.monotonic() - self.started
        fields = {k: v for k, v in fields.items() if v is not None}
        if self.engine_log is not None and level_of(event) in ("warning", "error"):
            fields.setdefault("vllm_log", str(self.engine_log))
        if not transient:
            self._pass_on(text, event, elapsed, fields)
        with self._lock:
            if self.tty:
                extra = "".join(f" {k}={v}" for k, v in fields.items() if k not in ("gate", "index", "total"))
                end = "" if transient else "\n"
                self.stream.write(f"\r\x1b[K[{elapsed:6.1f}s] {self.phase}: {text}{extra}{end}")
                self.stream.flush()
            else:
                log.log(
                    _LEVEL_NUMBERS[level_of(event)],
                    event,
                    msg=text,
                    phase=self.phase,
                    elapsed_s=round(elapsed, 2),
                    **fields,
                )

    def _pass_on(self, text: str, event: str, elapsed: float, fields: dict[str, Any]) -> None:
        """A line that stays goes to systemd while a start is under way, and to a reload's requesters."""
        # phase changes reach systemd from the supervisor itself (STATUS="<phase>: <candidate>")
        step = not event.startswith("phase.")
        if self.notifier is not None and step and self.phase in STARTING_PHASES:
            self.notifier.status(f"{self.phase}: {text}")
            self.notifier.extend_timeout(EXTEND_WHILE_STARTING_S)
        if self.mirror is not None:
            self.mirror(
                {"event": event, "msg": text, "phase": self.phase, "elapsed_s": round(elapsed, 2), **fields}
            )
