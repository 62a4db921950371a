"""Reload requests that carry an id, so `launch set --apply` and `launch rollback` each read the
verdict of their own reload, never another's.

The requester writes `reloads/<id>.request` and sends SIGHUP; the launcher takes every request
present when its reload begins (before it renders the profile, so each request's edit is in it) and,
when the reload has ended, writes `reloads/<id>.verdict.json` for each: the exit code the requester
should end with and one paragraph saying why. A SIGHUP without a request (`systemctl reload`) just
reloads. Files are written atomically; the requester removes its verdict once read. Each function
takes the profile's reloads directory (`StateStore.reloads_dir`).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from launcher.atomicfile import write_atomic

STALE_S = 86400.0  # verdicts nobody came for (a requester that was killed) are removed after a day


@dataclass(frozen=True, slots=True)
class Verdict:
    exit_code: int
    detail: str


def request(reloads: Path) -> str:
    rid = uuid.uuid4().hex
    write_atomic(reloads / f"{rid}.request", "")
    return rid


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
        body = {"id": rid, "exit_code": verdict.exit_code, "detail": verdict.detail}
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
        found = Verdict(int(body["exit_code"]), str(body.get("detail") or ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    with contextlib.suppress(OSError):
        path.unlink()
    return found
