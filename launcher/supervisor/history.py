"""The append-only history: starts, gate results, promotions, rollbacks — one JSON line each."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from launcher.atomicfile import append_line


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class History:
    path: Path

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": utc_now(), "event": event, **fields}
        append_line(self.path, json.dumps(record, sort_keys=True, default=str, ensure_ascii=False))
        return record

    def read(self, profile: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Records oldest first; a torn last line (crash mid-write) is skipped, never fatal."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if profile is None or record.get("profile") == profile:
                records.append(record)
        return records[-limit:] if limit else records
