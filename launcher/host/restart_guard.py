"""Stop retrying a candidate that keeps failing to start: N failures within T, per fingerprint.

Under `Restart=always` a start that cannot succeed (orphans holding 29 GiB on every card) once
became a 34-minute failure loop. The guard counts failed starts of one candidate (the plan's
fingerprint: argv + env) in the state dir, across launcher restarts, and says why it stopped.
A changed profile is a new candidate with a fresh count; a success clears the count.
Timestamps are wall-clock seconds: the count must survive the process (and a reboot).

A corrupt guard file (torn, not JSON, wrong types, a link or a FIFO) is never silent and never
stops a start: its counts are unknown, so they start again from 0 — at worst `max_failures` more
failed starts before the guard holds again, where refusing would keep production down over a
counter. Every status says so (preflight shows it as a warning, the journal files it) until the
next count rewrites the file, keeping the corrupt one aside as `restart_guard.json.corrupt-<time>`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.atomicfile import read_bytes_nofollow, write_atomic
from launcher.state.store import StateStore

_KEEP_REASONS = 5


@dataclass(frozen=True, slots=True)
class GuardStatus:
    fingerprint: str
    failures: int  # within the window
    max_failures: int
    window_s: float
    last_reason: str | None
    retry_at: float | None  # wall-clock time the oldest counted failure leaves the window
    note: str | None = None  # the guard file was corrupt: in words, and that counting began afresh

    @property
    def blocked(self) -> bool:
        return self.failures >= self.max_failures

    def describe(self) -> str:
        minutes = f"{self.window_s / 60:g} min"
        if not self.blocked:
            allowed = f"{self.max_failures} allowed in {minutes}"
            counted = f"candidate {self.fingerprint}: {self.failures} failed start(s) of {allowed}"
            return f"{self.note}; {counted}" if self.note else counted
        when = time.strftime("%H:%M:%S", time.localtime(self.retry_at)) if self.retry_at else "later"
        last = f" (last: {self.last_reason})" if self.last_reason else ""
        return (
            f"candidate {self.fingerprint} failed to start {self.failures} times in {minutes}{last}; "
            f"not retried before {when}"
        )


class RestartGuard:
    """Failed-start counts for one profile's candidates, in STATE/profiles/NAME/restart_guard.json."""

    def __init__(
        self,
        store: StateStore,
        profile: str,
        *,
        max_failures: int,
        window_s: float,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.path = store.restart_guard_path(profile)
        self.corrupt: str | None = None  # why the file could not be read, when it could not
        self.max_failures = max_failures
        self.window_s = window_s
        self._now = now

    def record_failure(self, fingerprint: str, reason: str) -> GuardStatus:
        data = self._load()
        entry = data.setdefault(fingerprint, {"failures": [], "reasons": []})
        entry["failures"] = [*self._recent(entry["failures"]), self._now()]
        entry["reasons"] = [*entry["reasons"], reason][-_KEEP_REASONS:]
        self._save(data)
        return self.status(fingerprint)

    def record_success(self, fingerprint: str) -> None:
        data = self._load()
        if data.pop(fingerprint, None) is not None or self.corrupt is not None:
            self._save(data)

    def should_retry(self, fingerprint: str) -> bool:
        return not self.status(fingerprint).blocked

    def status(self, fingerprint: str) -> GuardStatus:
        entry = self._load().get(fingerprint, {})
        recent = self._recent(entry.get("failures", []))
        reasons = entry.get("reasons") or [None]
        return GuardStatus(
            fingerprint=fingerprint,
            failures=len(recent),
            max_failures=self.max_failures,
            window_s=self.window_s,
            last_reason=reasons[-1],
            retry_at=(recent[-self.max_failures] + self.window_s)
            if len(recent) >= self.max_failures
            else None,
            note=f"{self.path.name} is corrupt ({self.corrupt}): failed starts are counted afresh"
            if self.corrupt
            else None,
        )

    def _recent(self, stamps: list[Any]) -> list[float]:
        since = self._now() - self.window_s
        return sorted(float(t) for t in stamps if isinstance(t, int | float) and float(t) > since)

    def _load(self) -> dict[str, Any]:
        """The counts; {} when there are none, and also when the file is corrupt (`self.corrupt`
        says why): a corrupt guard file must not stop a start, only restart its counts."""
        self.corrupt = None
        try:
            data = json.loads(read_bytes_nofollow(self.path).decode("utf-8"))
        except FileNotFoundError:
            return {}
        except OSError as err:
            self.corrupt = f"unreadable: {err.strerror or err}"
            return {}
        except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, nested too deep
            self.corrupt = str(err) or type(err).__name__
            return {}
        self.corrupt = _shape_problem(data)
        return data if self.corrupt is None else {}

    def _save(self, data: dict[str, Any]) -> None:
        if self.corrupt is not None:  # the corrupt file is kept for the operator, not overwritten
            self.store.set_aside(self.path, self.corrupt, self._now())
            self.corrupt = None
        try:
            write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n")
        except OSError:  # a full state dir must not stop a start over a counter (it only loses a count)
            return


def _shape_problem(data: Any) -> str | None:
    """How the file's JSON differs from {fingerprint: {"failures": [time…], "reasons": [text…]}}."""
    if not isinstance(data, dict):
        return f"expected a JSON object, found {type(data).__name__}"
    for fingerprint, entry in data.items():
        fields = ("failures", "reasons")
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k, []), list) for k in fields):
            return f"the entry of {fingerprint!r:.40} has the wrong type ({entry!r:.60})"
    return None


def guard_for(store_root: Path, profile: str, max_failures: int, window_s: float) -> RestartGuard:
    return RestartGuard(StateStore(store_root), profile, max_failures=max_failures, window_s=window_s)
