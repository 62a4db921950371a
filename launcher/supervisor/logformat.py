"""How the launcher's events look on stderr: a console line on a TTY; in systemd's journal, plain
`event key=value` text (journald stamps and prioritises each line itself, so JSON with a second
timestamp only made `journalctl -u` harder to read); JSON lines anywhere else, for collectors.
`VLLM_GATE_LOG_FORMAT` (`text`, `json`, `console`) asks for one of them wherever stderr goes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TextIO

from launcher.errors import BadInput
from launcher.terminal import is_journal

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
