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

While the reload runs, the launcher appends each progress line (what `launch try` shows: phases,
vLLM's startup steps, each gate) to `reloads/<id>.progress.jsonl`, so the requester shows the same
live progress; the verdict says how long the engine was down (`down_s`: from the stop of what
served to serving again). The requester removes both files once read.

Only regular files are requests: an entry that is not one (a directory, a symbolic link, a FIFO, a
socket, a device) is skipped, left for the operator and said (`reload.request_skipped`, a warning in
the journal), and the reload goes on without it. A control request is read up to MAX_REQUEST_BYTES,
never followed, never opened before it is known to be a regular file (a FIFO would block the serve
loop); one too large or garbled is answered invalid, removed and said.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import structlog

from basis.clock import SYSTEM_CLOCK, Clock
from launcher.atomicfile import write_atomic

STALE_S = 86400.0  # verdicts nobody came for (a requester that was killed) are removed after a day
PROGRESS_MAX_BYTES = 1 << 20  # a start writes a few dozen lines; a runaway one is cut here
log = structlog.get_logger("vllm-gate")


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
    down_s: float | None = None  # the engine stopped for this reload and served again after this long
    data: dict[str, Any] = field(default_factory=dict)  # what the requester needs beyond words (pids, port)

    @classmethod
    def implied(cls, exit_code: int, detail: str) -> Verdict:
        """The verdict an exit code alone stands for (a file written before the `verdict` field)."""
        return cls(_IMPLIED.get(exit_code, Outcome.FAILED), exit_code, detail)


def request(reloads: Path) -> str:
    """Ask for a reload. The launcher removes `<id>.request` and writes the verdict beside it, so
    the directory must be the launcher's to write: see `_hand_to_state_owner`."""
    rid = uuid.uuid4().hex
    reloads.mkdir(parents=True, exist_ok=True)
    _hand_to_state_owner(reloads)
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
    reloads.mkdir(parents=True, exist_ok=True)
    _hand_to_state_owner(reloads)
    write_atomic(reloads / f"{rid}.control", json.dumps({"action": str(action), "requester": requester}))
    return rid


def take_control(reloads: Path) -> list[ControlRequest]:
    """Every pending control request, oldest name first; an unreadable one is dropped (and answered
    as invalid), never acted on."""
    taken: list[ControlRequest] = []
    for path in sorted(reloads.glob("*.control")):
        raw = _read_control(path)
        if raw is None:
            continue
        try:
            body: Any = json.loads(raw) if len(raw) <= MAX_REQUEST_BYTES else {}
            taken.append(ControlRequest(path.stem, Action(body["action"]), int(body["requester"])))
        except (ValueError, KeyError, TypeError):
            why = (
                f"over {MAX_REQUEST_BYTES} bytes" if len(raw) > MAX_REQUEST_BYTES else "not a control request"
            )
            _said_skipped(path, why, "answered invalid and removed")
            answer(reloads, [path.stem], Verdict(Outcome.INVALID, 2, "not a control request"))
    return taken


def _read_control(path: Path) -> bytes | None:
    """Its first MAX_REQUEST_BYTES + 1 bytes, and the file removed; None (said) when it is not a
    regular file. Opened only once lstat saw a regular file, without following a link and without
    waiting for a writer: what replaced it in between is refused too."""
    try:
        what = _not_a_file(path)
        if what is None:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                raw = os.read(fd, MAX_REQUEST_BYTES + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else None
            finally:
                os.close(fd)
            what = None if raw is not None else "not a regular file"
        if what is not None:
            _said_skipped(path, what)
            return None
        path.unlink()
    except FileNotFoundError:
        return None
    except OSError as err:
        _said_skipped(path, f"unreadable ({err.strerror})")
        return None
    return raw


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_a_file(path: Path) -> str | None:
    """None for a regular file; else what the entry is, as the operator would name it (never followed)."""
    mode = os.lstat(path).st_mode
    if stat.S_ISREG(mode):
        return None
    return next((name for is_kind, name in _KINDS if is_kind(mode)), "a device or other special file")


def _said_skipped(path: Path, what: str, fate: str = "skipped, left for the operator to remove") -> None:
    log.warning(
        "reload.request_skipped", msg=f"not a reload request: {path.name}: {what}; {fate}", path=str(path)
    )


def _hand_to_state_owner(reloads: Path) -> None:
    """`sudo launch set --apply` beside a launcher that runs as its own user (the unit's
    `User=vllm-gate`, which owns its state dir) would leave a root-owned directory in which that
    launcher can neither remove the request nor answer it: give it to the state dir's owner."""
    if os.geteuid() != 0:
        return
    with contextlib.suppress(OSError):
        owner, here = os.stat(reloads.parent), os.lstat(reloads)
        if stat.S_ISDIR(here.st_mode) and (here.st_uid, here.st_gid) != (owner.st_uid, owner.st_gid):
            os.chown(reloads, owner.st_uid, owner.st_gid, follow_symlinks=False)


def take(reloads: Path) -> list[str]:
    """The ids of every pending request; they are this reload's from now on. An entry that is not a
    regular file is no request: skipped and said, and the reload goes on (it once ended the launcher)."""
    taken = []
    for path in sorted(reloads.glob("*.request")):
        try:
            what = _not_a_file(path)
            if what is None:
                path.unlink()
                taken.append(path.stem)
            else:
                _said_skipped(path, what)
        except FileNotFoundError:
            continue
        except OSError as err:  # replaced between lstat and unlink, or a dir the launcher cannot write
            _said_skipped(path, f"cannot be taken ({err.strerror})")
    return taken


def answer(reloads: Path, ids: list[str], verdict: Verdict, clock: Clock = SYSTEM_CLOCK) -> None:
    """Each request's verdict, by id; verdicts and progress files older than STALE_S are pruned."""
    for rid in ids:
        body = {
            "id": rid,
            "verdict": str(verdict.outcome),
            "exit_code": verdict.exit_code,
            "detail": verdict.detail,
            **({"data": verdict.data} if verdict.data else {}),
            **({"down_s": round(verdict.down_s, 3)} if verdict.down_s is not None else {}),
        }
        write_atomic(reloads / f"{rid}.verdict.json", json.dumps(body) + "\n")
    cutoff = clock.time() - STALE_S
    for old in [*reloads.glob("*.verdict.json"), *reloads.glob("*.progress.jsonl")]:
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff:
                old.unlink()


class ProgressFiles:
    """The launcher's side: each progress line of this reload, appended to each requester's file.
    Best effort: a full disk costs the requester its live lines, never the reload."""

    def __init__(self, reloads: Path, ids: list[str]) -> None:
        self.paths = [reloads / f"{rid}.progress.jsonl" for rid in ids]
        self.written = 0

    def __call__(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str, ensure_ascii=False) + "\n"
        if self.written + len(line) > PROGRESS_MAX_BYTES:
            return
        self.written += len(line)
        for path in self.paths:
            with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as out:
                out.write(line)


class ProgressTail:
    """The requester's side: `with ProgressTail(reloads, rid, show) as tail`, `tail.read()` on
    each poll passes the whole lines written since to `show`; leaving reads the last ones (written
    just before the verdict) and removes the file."""

    def __init__(self, reloads: Path, rid: str, show: Callable[[dict[str, Any]], None] | None) -> None:
        self.path = reloads / f"{rid}.progress.jsonl"
        self.show = show
        self.offset = 0

    def __enter__(self) -> ProgressTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.read()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def read(self) -> None:
        if self.show is None:
            return
        try:
            with self.path.open("rb") as source:
                source.seek(self.offset)
                chunk = source.read(PROGRESS_MAX_BYTES)
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for raw in complete.splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(raw)
                if isinstance(record, dict):
                    self.show(record)


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
    outcome the exit code implies. `down_s` where it is a duration."""
    implied = Verdict.implied(int(body["exit_code"]), str(body.get("detail") or ""))
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    down = body.get("down_s")
    down_s = (
        float(down) if isinstance(down, int | float) and not isinstance(down, bool) and down >= 0 else None
    )
    try:
        return Verdict(Outcome(body.get("verdict")), implied.exit_code, implied.detail, down_s, data)
    except ValueError:
        return Verdict(implied.outcome, implied.exit_code, implied.detail, down_s, data)
