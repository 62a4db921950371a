"""The engine's log file in the state dir: written once per chunk, rotated by size.

Why not `logging.handlers.RotatingFileHandler`: it formats, locks and checks the size once per
record, ~23 µs a line, 30 times the parser's own cost on a chatty engine. Here a chunk of lines is
one `write` of bytes, and the size check is a sum. A full or read-only disk never stops its writer
(the log keeper: the engine would block on a pipe nobody drains): the chunk is counted as lost, and
the next chunk tries again.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO

MAX_BYTES = 64 * 1024 * 1024
BACKUPS = 5


class EngineLogFile:
    """`engine.log`, then `engine.log.1` … `engine.log.5` (oldest), like RotatingFileHandler."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._file: BinaryIO | None = None
        self._size = 0
        self.lost_bytes = 0  # not written: the disk refused them
        self.last_error: str | None = None

    def write(self, text: str) -> None:
        data = text.encode("utf-8", errors="replace")
        try:
            if self._file is None:
                self._open()
            assert self._file is not None
            written = self._file.write(data) or 0
            self._size += written
            self.lost_bytes += len(data) - written
            if self._size >= self.max_bytes:
                self._rotate()
        except OSError as err:
            self.lost_bytes += len(data)
            self.last_error = f"{self.path}: {err.strerror or err}"
            self.close()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115  (kept open across writes)
        self._size = self._file.seek(0, os.SEEK_END)

    def _rotate(self) -> None:
        self.close()
        for index in range(self.backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
        if self.backups > 0:
            os.replace(self.path, f"{self.path}.1")
        else:
            self.path.unlink(missing_ok=True)
        self._open()
