"""The state dir: last-good records, last log facts, history and locks, one place for their paths.

Layout (all JSON written atomically; history is append-only JSON lines):
    STATE/profiles/NAME/last_good.json   the promoted plan: argv, env, fingerprint, resolved profile
    STATE/profiles/NAME/last_facts.json  log facts of the last start (KV pool, capture, outcome)
    STATE/history.jsonl                  starts, gate results, promotions, rollbacks
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic
from launcher.state.records import LAST_GOOD, LAST_GOOD_OPTIONAL, LAST_GOOD_SEEN, read_record


@dataclass(frozen=True, slots=True)
class StateStore:
    root: Path
    # The write seam: the serve loop passes one that queues a failed write for a retry.
    write: Callable[[Path, str], None] = field(default=write_atomic)

    def profile_dir(self, profile: str) -> Path:
        return self.root / "profiles" / profile

    def engine_log(self, profile: str, *, try_run: bool = False) -> Path:
        """vLLM's own log: the server's (`engine.log`, rotated) or the last `launch try`'s (`try.log`)."""
        return self.profile_dir(profile) / "logs" / ("try.log" if try_run else "engine.log")

    @property
    def history_path(self) -> Path:
        return self.root / "history.jsonl"

    def last_good(self, profile: str) -> dict[str, Any] | None:
        """The promoted record as far as a diff needs it: argv, env, fingerprint (BadInput naming
        the file when corrupt)."""
        return read_record(self.profile_dir(profile) / "last_good.json", LAST_GOOD_SEEN)

    def last_good_to_start(self, profile: str) -> dict[str, Any] | None:
        """The promoted record, checked field by field as `Candidate.from_record` needs it."""
        return read_record(self.profile_dir(profile) / "last_good.json", LAST_GOOD, LAST_GOOD_OPTIONAL)

    def write_last_good(self, profile: str, record: dict[str, Any]) -> None:
        self._write(self.profile_dir(profile) / "last_good.json", record)

    def last_facts(self, profile: str) -> dict[str, Any] | None:
        return read_record(self.profile_dir(profile) / "last_facts.json", {})

    def write_last_facts(self, profile: str, facts: dict[str, Any]) -> None:
        self._write(self.profile_dir(profile) / "last_facts.json", facts)

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        self.write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
