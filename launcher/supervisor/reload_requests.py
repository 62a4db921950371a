"""Reload requests that carry an id, so `launch set --apply` and `launch rollback` each read the
verdict of their own reload, never another's.

The requester writes `reloads/<id>.request` and sends SIGHUP; the launcher takes every request
present when its reload begins (before it renders the profile, so each request's edit is in it) and,
when the reload has ended, writes `reloads/<id>.verdict.json` for each: what came of it (`verdict`,
one of `Outcome`), the exit code the requester should end with and one paragraph saying why. A
SIGHUP without a request (`systemctl reload`) just reloads. Files are written atomically; the
requester removes its verdict once read. A verdict file from a launcher older than the `verdict`
field reads as the outcome its exit code implies. Each function takes the profile's reloads
directory (`StateStore.reloads_dir`).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic

STALE_S = 86400.0  # verdicts nobody came for (a requester that was killed) are removed after a day


class Outcome(StrEnum):
    """What came of a reload, as the requester reads it (no parsing of the detail's words)."""

    PROMOTED = "promoted"  # the candidate passed its gates and serves (exit 0)
    UNCHANGED = "unchanged"  # the same launch already serves: nothing restarted (exit 0)
    REFUSED = "refused"  # preflight or the restart guard refused it; the engine kept serving (exit 4)
    INVALID = "invalid"  # the profile does not render; the engine kept serving (exit 2)
    ROLLED_BACK = "rolled_back"  # the gates rejected it; last-good serves (exit 3)
    FAILED = "failed"  # nothing serves, or the launcher is leaving on an error (its exit code)
    PARKED = "parked"  # a control request: the engine sleeps, its GPUs are free for the requester (exit 0)
    WOKEN = "woken"  # a control request: the engine serves again (exit 0)


# What a verdict file without the `verdict` field meant, by its exit code.
_IMPLIED = {0: Outcome.PROMOTED, 2: Outcome.INVALID, 3: Outcome.ROLLED_BACK, 4: Outcome.REFUSED}


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    exit_code: int
    detail: str
    data: dict[str, Any] = field(default_factory=dict)  # what the requester needs beyond words (pids, port)

    @classmethod
    def implied(cls, exit_code: int, detail: str) -> Verdict:
        """The verdict an exit code alone stands for (a file written before the `verdict` field)."""
        return cls(_IMPLIED.get(exit_code, Outcome.FAILED), exit_code, detail)


def request(reloads: Path) -> str:
    rid = uuid.uuid4().hex
    write_atomic(reloads / f"{rid}.request", "")
    return rid


class Action(StrEnum):
    """What another process of ours may ask of a running launcher besides a reload."""

    PARK = "park"  # put the serving engine to sleep and lend its GPUs (`launch probe`'s arms)
    WAKE = "wake"  # wake it and serve again


@dataclass(frozen=True, slots=True)
class ControlRequest:
    rid: str
    action: Action
    requester: int  # its pid: a parked engine wakes by itself once the requester is gone


MAX_REQUEST_BYTES = 4096


def ask(reloads: Path, action: Action, requester: int) -> str:
    """A control request (`<id>.control`, answered like a reload's, by id); SIGHUP delivers it."""
    rid = uuid.uuid4().hex
    write_atomic(reloads / f"{rid}.control", json.dumps({"action": str(action), "requester": requester}))
    return rid


def take_control(reloads: Path) -> list[ControlRequest]:
    """Every pending control request, oldest name first; an unreadable one is dropped (and answered
    as invalid), never acted on."""
    taken: list[ControlRequest] = []
    for path in sorted(reloads.glob("*.control")):
        try:
            raw = path.read_bytes()[: MAX_REQUEST_BYTES + 1]
            path.unlink()
        except OSError:
            continue
        try:
            body: Any = json.loads(raw) if len(raw) <= MAX_REQUEST_BYTES else {}
            taken.append(ControlRequest(path.stem, Action(body["action"]), int(body["requester"])))
        except (ValueError, KeyError, TypeError):
            answer(reloads, [path.stem], Verdict(Outcome.INVALID, 2, "not a control request"))
    return taken


def take(reloads: Path) -> list[str]:
    """The ids of every pending request; they are this reload's from now on."""
    taken = []
    for path in sorted(reloads.glob("*.request")):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            taken.append(path.stem)
    return taken


def answer(reloads: Path, ids: list[str], verdict: Verdict) -> None:
    for rid in ids:
        body = {
            "id": rid,
            "verdict": str(verdict.outcome),
            "exit_code": verdict.exit_code,
            "detail": verdict.detail,
            "data": verdict.data,
        }
        write_atomic(reloads / f"{rid}.verdict.json", json.dumps(body) + "\n")
    cutoff = time.time() - STALE_S
    for old in reloads.glob("*.verdict.json"):
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff:
                old.unlink()


def verdict(reloads: Path, rid: str) -> Verdict | None:
    """This request's verdict once written (and then removed), else None."""
    path = reloads / f"{rid}.verdict.json"
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        found = _from_body(body)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    with contextlib.suppress(OSError):
        path.unlink()
    return found


def _from_body(body: Any) -> Verdict:
    """The `verdict` field when it names an outcome; else (an older or newer launcher's file) the
    outcome the exit code implies."""
    implied = Verdict.implied(int(body["exit_code"]), str(body.get("detail") or ""))
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    try:
        return Verdict(Outcome(body.get("verdict")), implied.exit_code, implied.detail, data)
    except ValueError:
        return Verdict(implied.outcome, implied.exit_code, implied.detail, data)
