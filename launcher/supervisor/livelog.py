"""The engine's live log: split into lines per stream, fed to the log-facts parser, kept for the
gates, written to a rotated file in the state dir — and a condition gates can wait on."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.logfacts.events import LogEvent
from launcher.logfacts.stream import LogStream

EventSink = Callable[[LogEvent], None]
MAX_KEPT_LINES = 200_000
LINE_END = re.compile(r"\r\n|\r|\n")


class LiveLog:
    def __init__(
        self, log_path: Path | None, on_event: EventSink | None = None, markers: Sequence[str] = ()
    ) -> None:
        self._stream = LogStream(markers=list(markers))
        self._lines: list[str] = []
        self._partial: dict[str, str] = {}
        self._changed = threading.Condition()
        self._on_event = on_event
        self._file = _rotating_file(log_path) if log_path is not None else None
        self.events: list[LogEvent] = []

    def feed(self, stream: str, chunk: str) -> None:
        """Called from the reader threads with raw chunks. Only complete lines (ending in '\n', or
        tqdm's '\r') go to the parser, so stdout and stderr never interleave inside a line."""
        text = self._partial.pop(stream, "") + chunk
        cut = max(text.rfind("\n"), text.rfind("\r"))
        if cut < 0:
            self._partial[stream] = text
            return
        self._partial[stream] = text[cut + 1 :]
        self._accept(text[: cut + 1])

    def flush(self) -> None:
        """The engine is gone: whatever was left without a line end is a line too."""
        rest = "".join(text + "\n" for text in self._partial.values() if text)
        self._partial.clear()
        self._accept(rest)

    def _accept(self, complete: str) -> None:
        if not complete:
            return
        lines = [line for line in LINE_END.split(complete) if line]
        with self._changed:
            events = self._stream.feed(complete)
            self._lines.extend(lines)
            if len(self._lines) > MAX_KEPT_LINES:
                del self._lines[: len(self._lines) - MAX_KEPT_LINES]
            self.events.extend(events)
            self._changed.notify_all()
        if self._file is not None:
            for line in lines:
                self._file.info(line)
        if self._on_event is not None:
            for event in events:
                self._on_event(event)

    def notify(self) -> None:
        """Wake waiting gates (the engine exited, or a stop was asked)."""
        with self._changed:
            self._changed.notify_all()

    # --- gates.context.LogView ---
    def facts(self) -> Mapping[str, Any]:
        with self._changed:
            return self._stream.facts.to_json()

    def lines(self) -> Sequence[str]:
        with self._changed:
            return list(self._lines)

    def wait_for_change(self, timeout_s: float) -> None:
        with self._changed:
            self._changed.wait(timeout=timeout_s)

    def close(self) -> None:
        if self._file is not None:
            for handler in list(self._file.handlers):
                with contextlib.suppress(OSError):  # a full disk fails the last flush: bookkeeping only
                    handler.close()
                self._file.removeHandler(handler)


def _rotating_file(path: Path) -> logging.Logger:
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger(f"vllm-gate.engine-log.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for handler in list(logger.handlers):
        handler.close()
        logger.removeHandler(handler)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=64 * 1024 * 1024, backupCount=5, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    return logger
