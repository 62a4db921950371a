"""The state dir: last-good records, last log facts, history and locks, one place for their paths.

Layout (all JSON written atomically; history is append-only JSON lines):
    STATE/profiles/NAME/last_good.json   the promoted plan: argv, env, fingerprint, resolved profile
    STATE/profiles/NAME/last_facts.json  log facts of the last start (KV pool, capture, outcome)
    STATE/history.jsonl                  starts, gate results, promotions, rollbacks
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic
from launcher.errors import BadInput


@dataclass(frozen=True, slots=True)
class StateStore:
    root: Path

    def profile_dir(self, profile: str) -> Path:
        return self.root / "profiles" / profile

    @property
    def history_path(self) -> Path:
        return self.root / "history.jsonl"

    def last_good(self, profile: str) -> dict[str, Any] | None:
        return self._read(self.profile_dir(profile) / "last_good.json")

    def write_last_good(self, profile: str, record: dict[str, Any]) -> None:
        self._write(self.profile_dir(profile) / "last_good.json", record)

    def last_facts(self, profile: str) -> dict[str, Any] | None:
        return self._read(self.profile_dir(profile) / "last_facts.json")

    def write_last_facts(self, profile: str, facts: dict[str, Any]) -> None:
        self._write(self.profile_dir(profile) / "last_facts.json", facts)

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as err:
            raise BadInput(f"cannot read state file {path}: {err.strerror or err}") from err
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise BadInput(f"state file {path} is corrupt (line {err.lineno}): {err.msg}") from err
        return data if isinstance(data, dict) else None

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
