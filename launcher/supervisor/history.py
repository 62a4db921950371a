"""The append-only history: starts, gate results, promotions, rollbacks — one JSON line each."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from launcher.atomicfile import append_line
from launcher.errors import BadInput
from launcher.state.records import HISTORY, HISTORY_OPTIONAL, shape_problem
from launcher.supervisor.events import Event


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class HistoryScan:
    records: list[dict[str, Any]]
    skipped: list[str]  # "line N: why" for each corrupt record (torn, not UTF-8, wrong types)


@dataclass(frozen=True, slots=True)
class History:
    path: Path
    # The append seam: the serve loop passes one that queues a failed write for a retry.
    write: Callable[[Path, str], None] = field(default=append_line)

    def append(self, event: Event, **fields: Any) -> dict[str, Any]:
        record = {"ts": utc_now(), "event": event, **fields}
        self.write(self.path, json.dumps(record, sort_keys=True, default=str, ensure_ascii=False))
        return record

    def read(self, profile: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Records oldest first; a corrupt record is skipped, never fatal."""
        return self.scan(profile, limit).records

    def scan(self, profile: str | None = None, limit: int | None = None) -> HistoryScan:
        """Records oldest first, and what was skipped: a torn line (crash mid-write), bytes that
        are not UTF-8, JSON that is not a record of the right shape."""
        try:
            lines = self.path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return HistoryScan([], [])
        except OSError as err:
            raise BadInput(f"cannot read the history {self.path}: {err.strerror or err}") from err
        records: list[dict[str, Any]] = []
        skipped: list[str] = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            record, why = _parse(raw)
            if record is None:
                skipped.append(f"line {number}: {why}")
            elif profile is None or record.get("profile") == profile:
                records.append(record)
        return HistoryScan(records[-limit:] if limit else records, skipped)


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except (json.JSONDecodeError, RecursionError):
        return None, "not a JSON record (torn or corrupt)"
    problem = shape_problem(data, HISTORY, HISTORY_OPTIONAL)
    return (None, problem) if problem is not None else (dict(data), "")
