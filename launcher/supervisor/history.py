"""The append-only history: starts, gate results, promotions, rollbacks — one JSON line each — and
its event names, declared once (`Event`): the supervisor, `launch try` and `launch probe` write
them; the probe's preview, `launch logs`, the benches and the tests read them.

The values are the strings history.jsonl has always carried, so a file written before the enum
reads the same; an event name this launcher does not know (a newer launcher's) is kept as a string
by the readers, never an error. A corrupt record (torn by a crash mid-write, not UTF-8, the wrong
shape) is skipped when read, never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from basis.clock import SYSTEM_CLOCK, Clock, utc_stamp
from launcher.atomicfile import append_line
from launcher.errors import BadInput
from launcher.state.records import HISTORY, HISTORY_OPTIONAL, shape_problem


class Event(StrEnum):
    # one start of one candidate (supervisor/service.py)
    START = "start"  # the engine was spawned: label, fingerprint, engine_pid, argv
    GATES = "gates"  # the chain's report: passed, gates
    PROMOTED = "promoted"  # recorded as last-good; READY=1
    REJECTED = "rejected"  # the gates, preflight or the restart guard turned the candidate down
    ROLLBACK = "rollback"  # last-good is started instead
    SERVING_LAST_GOOD = "serving_last_good"
    FAILED = "failed"  # nothing could be served, or the launcher left on an error
    PREFLIGHT_REFUSED = "preflight_refused"  # refused before anything started (exit 4)
    ENGINE_DIED = "engine_died"  # after promotion: how, pid, process
    ENGINE_STOPPED = "engine_stopped"  # the launcher stopped it: why, graceful, killed, leftovers
    STOPPED = "stopped"  # the launcher ended on a signal (or was found killed by the next start)
    LEAK_DETECTED = "leak_detected"  # written before the serving watch (its leaks are `starving`)
    # the serving watch (launcher/watch/, supervisor/recovery.py)
    WATCH = "watch"  # its verdict changed (degraded, or serving again): verdict, check, detail, process
    WEDGED = "wedged"  # requests hang: check, detail, process, figures, action, incident
    FAILING = "failing"  # requests answer errors
    STARVING = "starving"  # host RAM, swap or the leak rule
    RECOVERED = "recovered"  # serving again after the watch's restart: how, reason
    # a change tried beside a sleeping last-good (supervisor/park.py)
    PARKED = "parked"  # the serving engine sleeps: seconds, its GPU memory awake and asleep
    PARK_SKIPPED = "park_skipped"  # it could not sleep (no sleep mode, host RAM, a failed sleep): stopped
    WOKEN = "woken"  # the sleeper serves again after its candidate was rejected: seconds, gates
    WAKE_FAILED = "wake_failed"  # the wake, its prefix-cache reset or its re-gate failed: cold start
    BESIDE = "beside"  # a candidate is tried beside what serves: label, port, serving, power caps
    BESIDE_SKIPPED = "beside_skipped"  # trial = "beside" could not be: reason, what happens instead
    POWER_RESTORED = "power_restored"  # the GPUs' power limits put back after a trial beside: problems
    SWITCHED = "switched"  # what serves moved: the front door pointed at it, the on_switch hook run
    DRAINED = "drained"  # the front door held new requests and those in flight ended (or were cut)
    GREEDY_REFERENCE = "greedy_reference"  # what serves answered the fixed greedy prompt: checked at a wake
    # reloads (supervisor/reload.py)
    RELOAD = "reload"  # the serving engine is stopped for a new candidate; warm: its weights read ahead
    RELOAD_NOOP = "reload_noop"  # the same launch: nothing restarted
    RELOAD_REFUSED = "reload_refused"  # the profile does not render, or preflight/the guard refused
    # the other writers
    TRY = "try"  # `launch try`
    PROBE_STARTED = "probe_started"
    PROBE_ARM = "probe_arm"
    PROBE_FINISHED = "probe_finished"
    PROBE_RECOVERED = "probe_recovered"  # the next start restored production after a killed probe


def utc_now(clock: Clock = SYSTEM_CLOCK) -> str:
    """Now, as every record of ours writes a moment (read through the clock, which a test may fake)."""
    return utc_stamp(clock.time())


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
