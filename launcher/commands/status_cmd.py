"""`launch status` and `launch history`: what runs now, and what happened."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import click
import psutil

from launcher.atomicfile import read_bytes_nofollow
from launcher.commands.profile_arg import profile_option
from launcher.commands.timeout_arg import TIMEOUT_S
from launcher.errors import BadInput, GateError
from launcher.profile.loader import NAME_RE, PROFILE_SUFFIX
from launcher.settings import GlobalOptions
from launcher.state.serving import (
    EXIT_UNKNOWN,
    NEVER_RUN,
    NOT_SERVING_VERDICTS,
    SERVING_PHASES,
    UNKNOWN,
    drift,
    exit_code,
    serving_entry,
    watch_verdict,
)
from launcher.state.store import StateStore
from launcher.supervisor.control import running_launcher_pid
from launcher.supervisor.history import History
from launcher.supervisor.start_verdict import UNJUDGED, unjudged_in_status
from launcher.supervisor.status import read_status, stale_cause
from launcher.terminal import LiveLine

UNDER_WAY = frozenset({"starting", "gating", "rolling_back"})  # what `--wait` waits out
# What a launcher started just before may still turn into a start: `launch --profile P &` then
# `launch status --wait` reads before that launcher has even taken its lock (Python's imports).
MAY_START = frozenset({NEVER_RUN, "stopped", "failed"})
START_GRACE_S = 10.0  # how long `--wait` gives it to take the profile's lock
WAIT_POLL_S = 0.2
PROBE_DETAIL = "launch probe pid"  # how launcher/probe/session.py's status detail begins


@click.command("status")
@profile_option("One profile (default: every profile with a status).", dest="name")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object on stdout, always {"state_dir", "profiles": [one object per profile]}.',
)
@click.option(
    "--wait",
    is_flag=True,
    help="Block while a start, a reload or a rollback is under way; then print and exit with the verdict "
    "(as `kubectl rollout status`). A launcher started just before is given 10 s to take the profile. "
    "On a terminal, one line on stderr says what it waits for.",
)
@click.option(
    "--timeout-s",
    type=TIMEOUT_S,
    default=1800.0,
    show_default=True,
    help="With --wait: give up after this long (exit 3, saying what it still does).",
)
@click.pass_obj
def status_cmd(options: GlobalOptions, name: str | None, as_json: bool, wait: bool, timeout_s: float) -> None:
    """What runs now: phase, profile, engine pid, uptime, the last gates, why the last rollback
    happened, and whether the profile file differs from what serves.

    \b
    Exit 0 serving the profile's launch, 6 serving its last-good (a change was rejected and rolled
    back: not what the file says), 3 not serving (starting, gating, stopped, failed, never run, or
    judged wedged or failing by the serving watch), 4 unknown: no such profile (no profile file and
    no state), or a running launcher that could not keep its record current (a full or read-only
    state dir). With several profiles: the worst of them.
      launch status --profile prod --wait --timeout-s 900    # after `launch set ... --apply`, in CI
    """
    store = StateStore(options.state_dir)
    names = _profile_names(store, name)
    read = partial(_entries_now, options, store, names, listing=name is None)
    entries = _wait_out(read, read(), timeout_s, LiveLine(sys.stderr)) if wait else read()
    code = exit_code(entries)
    if as_json:
        click.echo(json.dumps({"state_dir": str(store.root), "profiles": entries}, indent=2, default=str))
    else:
        click.echo(_shown(store, entries, name, code))
    for entry in entries:
        if wait and entry["phase"] in UNDER_WAY:
            click.echo(f"{entry['profile']}: still {entry['phase']} after {timeout_s:g} s", err=True)
    click.get_current_context().exit(code)


def _shown(store: StateStore, entries: list[dict[str, Any]], name: str | None, code: int) -> str:
    """What the operator reads: each profile's block, or that nothing has run (and where we looked)."""
    if any(e["phase"] not in (NEVER_RUN, UNKNOWN) or e.get("stale") for e in entries):
        return "\n".join(_human(entry) for entry in entries)
    which = f" for profile {name!r}" if name else ""
    missing = " and there is no such profile" if code == EXIT_UNKNOWN else ""
    return f"nothing has run yet{which} (state dir {store.root}){missing}"


def _profile_names(store: StateStore, name: str | None) -> list[str]:
    """The profile named, or every one the state dir has a directory for."""
    if name is not None and not NAME_RE.match(name):
        raise BadInput(f"invalid profile name {name!r}", hint="use letters, digits, '-', '_' and '.'")
    return [name] if name else sorted(p.name for p in store.profiles_root.glob("*") if p.is_dir())


def _wait_out(
    read: Callable[[], list[dict[str, Any]]], entries: list[dict[str, Any]], timeout_s: float, line: LiveLine
) -> list[dict[str, Any]]:
    """`--wait`: the entries read again until none is under way, or until `timeout_s` has passed.
    For its first START_GRACE_S, a profile with no launcher (never run, stopped, failed) is waited
    on too: a launcher started just before has not taken its lock yet. On a terminal, `line` says
    what it waits for, and how long it has."""
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        while (now := time.monotonic()) < deadline and _waits_on(
            entries, may_start=now - start < START_GRACE_S
        ):
            line.show(waiting_for(entries, now - start, timeout_s, may_start=now - start < START_GRACE_S))
            time.sleep(WAIT_POLL_S)
            entries = read()
    finally:
        line.clear()
    return entries


def waiting_for(entries: list[dict[str, Any]], waited_s: float, timeout_s: float, *, may_start: bool) -> str:
    """`waiting 12 s of 1800: prod gating (candidate prod@1a2b…)`: each profile waited on, its
    phase and what its launcher last said it does."""
    waited = [e for e in entries if e["phase"] in UNDER_WAY or (may_start and e["phase"] in MAY_START)]
    parts = []
    for entry in waited:
        if entry["phase"] in UNDER_WAY:
            detail = f" ({entry['detail']})" if entry.get("detail") else ""
            parts.append(f"{entry['profile']} {entry['phase']}{detail}")
        else:
            parts.append(
                f"{entry['profile']}: no launcher yet (one started just before gets {START_GRACE_S:g} s)"
            )
    return f"waiting {waited_s:.0f} s of {timeout_s:g}: " + "; ".join(parts)


def _waits_on(entries: list[dict[str, Any]], *, may_start: bool) -> bool:
    waited = UNDER_WAY | MAY_START if may_start else UNDER_WAY
    return any(e["phase"] in waited for e in entries)


def _entries_now(
    options: GlobalOptions, store: StateStore, names: list[str], *, listing: bool
) -> list[dict[str, Any]]:
    found = {n: s for n in names if (s := _status(store, n)) is not None}
    return _entries(options, store, names, found, listing=listing)


def _entries(
    options: GlobalOptions,
    store: StateStore,
    names: list[str],
    statuses: dict[str, dict[str, Any]],
    *,
    listing: bool,
) -> list[dict[str, Any]]:
    """One `serving_entry` per profile: every one with a status, or the one named (listed also
    when it has no status: never run, or unknown)."""
    entries = []
    for profile in names:
        status = statuses.get(profile)
        if status is None and listing:
            continue  # a directory under STATE/profiles/ that never had a status: nothing to say
        known = (options.profiles_dir / f"{profile}{PROFILE_SUFFIX}").is_file()
        last_good = _last_good(store, profile) if status is not None else None
        entries.append(
            serving_entry(
                profile,
                status,
                last_good,
                profile_known=known or status is not None,
                profile_fingerprint=_profile_fingerprint(options, profile) if known else None,
            )
        )
    return entries


def _profile_fingerprint(options: GlobalOptions, profile: str) -> str | None:
    """What the profile file renders to now; None when it does not render (the dry run says why)."""
    from launcher.profile.plan import build_plan

    try:
        plan = build_plan(options.profiles_dir, profile)
    except GateError:
        return None
    return None if plan.errors else plan.fingerprint()


def _last_good(store: StateStore, profile: str) -> dict[str, Any] | None:
    try:
        return store.last_good(profile)
    except BadInput:
        return None  # an unreadable record: the entry says serving, without URL and model


def _status(store: StateStore, name: str) -> dict[str, Any] | None:
    status = read_status(store.status_path(name))
    holder = _lock_holder(store, name)
    if holder is not None and (status is None or status.get("launcher_pid") != holder):
        status = _not_written_yet(holder)  # what is there is an older launcher's, or nothing
    if status is None:
        return None
    status.setdefault("profile", name)
    pid = int(status.get("launcher_pid", 0) or 0)
    alive = psutil.pid_exists(pid)
    status["launcher_alive"] = alive
    if not alive:
        without_launcher(status)
    else:
        directory = store.status_path(name).parent
        cause = stale_cause(status, time.time(), partial(cannot_write, directory, pid))
        if cause is not None:
            unconfirmed(status, cause)
    if status.get("phase") in ("serving", "serving_last_good"):  # last-good is what serves
        status.update(_endpoint((_last_good(store, name) or {}).get("argv")))
    status["engine_log"] = str(store.engine_log(name))  # `launch logs NAME` reads it
    kept = store.set_aside_files(name)
    if kept:  # corrupt state files the launcher moved out of its way: said until the operator looks
        status["kept_aside"] = [path.name for path in kept]
    started = status.get("engine_started_at")
    status["uptime_s"] = _age(started) if alive and started and status.get("engine_pid") else None
    return status


def _lock_holder(store: StateStore, name: str) -> int | None:
    """The live launcher that holds the profile (launcher.json), if any; a planted link, FIFO or
    huge file in its place is no holder, and never hangs `launch status`."""
    try:
        read_bytes_nofollow(store.launcher_info_path(name), limit=4096)
    except OSError:
        return None
    return running_launcher_pid(store.root, name)


def _not_written_yet(holder: int) -> dict[str, Any]:
    """A launcher between taking the profile's lock and writing its first status is starting."""
    return {
        "phase": "starting",
        "launcher_pid": holder,
        "detail": f"launcher pid {holder} holds the profile and has written no status yet "
        "(a start under way, or `launch try`)",
    }


def without_launcher(status: dict[str, Any]) -> None:
    """A status whose launcher is gone says so: stopped (unless it had ended), with no engine pid,
    which may be anyone's by now; a probe that died before production came back names the way back."""
    if str(status.get("detail") or "").startswith(PROBE_DETAIL):
        # The probe wrote "production comes back when it ends" and was killed before it could.
        status["detail"] = (
            f"launch probe pid {status.get('launcher_pid')} is gone and production did not come back: "
            f"`launch probe --recover` restores it (so does the profile's next start)"
        )
    if status.get("phase") not in ("stopped", "failed"):
        status["detail"] = f"launcher pid {status.get('launcher_pid')} is gone (last phase {status['phase']})"
        status["phase"] = "stopped"
    if status.get("engine_pid"):
        status["engine_pid"] = None


def unconfirmed(status: dict[str, Any], cause: str) -> None:
    """A record its live launcher could not keep confirmed says serving, but nobody knows: its
    state is unknown (exit 4), with why, and the phase it last wrote kept beside."""
    status["stale"] = cause
    status["recorded_phase"] = status["phase"]
    status["phase"] = UNKNOWN
    status["detail"] = f"the launcher could not write its state: {cause}"


def cannot_write(directory: Path, launcher_pid: int) -> str | None:
    """What this reader can see of why the launcher cannot write `directory`: a full or read-only
    file system, or a directory its user may not write (asked only by the launcher's own user:
    another user's answer says nothing of the launcher's)."""
    try:
        disk = os.statvfs(directory)
    except OSError as err:
        return f"{directory}: {err.strerror or err}"
    if disk.f_flag & os.ST_RDONLY:
        return f"{directory} is on a read-only file system"
    if disk.f_bavail == 0 or (disk.f_files > 0 and disk.f_favail == 0):
        return f"no space left on {directory}"
    if _same_user(launcher_pid) and not os.access(directory, os.W_OK):
        return f"{directory} is not writable"
    return None


def _same_user(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).uids().effective == os.geteuid())
    except psutil.Error:
        return False


def _endpoint(argv: object) -> dict[str, str]:
    """URL and model of the promoted launch, from its recorded argv (vLLM's defaults filled in)."""
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return {}

    def after(flag: str) -> str | None:
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else None

    host = after("--host") or "0.0.0.0"
    model = after("--served-model-name") or (argv[argv.index("serve") + 1] if "serve" in argv[:-1] else None)
    # a wildcard is reached on loopback; an IPv6 address is bracketed (as state/serving.py _url)
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else f"[{host}]" if ":" in host else host
    shown = {"url": f"http://{host}:{after('--port') or 8000}"}
    return {**shown, "model": model} if model else shown


def _age(stamp: str) -> float | None:
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return round((datetime.now(UTC) - then).total_seconds(), 1)


LABELS = {  # status.json key → what the operator reads
    "url": "url",
    "model": "model",
    "serving_fingerprint": "serving launch",
    "engine_pid": "vLLM pid",
    "uptime_s": "up (s)",
    "rollback_reason": "last rollback because",
    "detail": "detail",
    "engine_log": "vLLM log",
}


def _headline(status: dict[str, Any]) -> str:
    """`prod: serving`; but never "serving" alone beside exit 3: a serving phase the watch judged
    wedged or failing is up, and does not serve (state/serving.py `exit_code`)."""
    if status.get("stale"):
        return f"{status['profile']}: {UNKNOWN}: the launcher could not write its state: {status['stale']}"
    verdict = watch_verdict(status)
    if status["phase"] in SERVING_PHASES and verdict in NOT_SERVING_VERDICTS:
        return f"{status['profile']}: {status['phase']}, but the serving watch says {verdict}: not serving"
    return f"{status['profile']}: {status['phase']}"


def _human(status: dict[str, Any]) -> str:
    lines = [_headline(status)]
    if status.get("stale"):
        return "\n".join([*lines, *_stale_lines(status)])
    for key, label in LABELS.items():
        if status.get(key) is not None:
            lines.append(f"  {label}: {status[key]}")
        if key == "url" and status.get("engine_url") not in (None, status.get("url")):
            lines.append(f"  engine: {status['engine_url']} (clients use the front door above)")
    differs = drift(status)
    if differs is not None:
        lines.append(f"  file: {differs}")
    trial = status.get("trial")
    if isinstance(trial, dict):
        where = f"port {trial.get('port')}, engine pid {trial.get('engine_pid')}"
        lines.append(f"  trial: {trial.get('label')} beside what serves ({where})")
    watch = status.get("watch")
    if status.get("phase") in SERVING_PHASES and isinstance(watch, dict) and watch.get("verdict"):
        lines.append(f"  watch: {_watch_line(watch)}")
    lines += _gate_lines(status.get("gates") or [], status.get("rollback_reason"))
    for name in status.get("kept_aside") or []:
        lines.append(f"  kept aside: {name} (a corrupt state file; look at it, then remove it)")
    return "\n".join(lines)


def _stale_lines(status: dict[str, Any]) -> list[str]:
    """What the record said when it was last written: no more than that, and when."""
    written = f"  last written: {status.get('recorded_phase')} at {status.get('confirmed_at')}"
    return [
        f"{written} by launcher pid {status.get('launcher_pid')} (still running)",
        f"  vLLM log: {status['engine_log']}",
    ]


def _gate_lines(gates: list[dict[str, Any]], rollback_reason: object) -> list[str]:
    """One line a gate; beside an engine_start verdict, the gates vLLM's exit left unjudged are not
    run (the verdict is the engine's, not the gate's that was waiting)."""
    unjudged = unjudged_in_status(gates, rollback_reason)
    return [
        f"  gate {gate['name']}: not run — {UNJUDGED}"
        if left
        else f"  gate {gate['name']}: {gate['verdict']} — {gate['summary']}"
        for gate, left in zip(gates, unjudged, strict=True)
    ]


def _watch_line(watch: dict[str, Any]) -> str:
    """`wedged by canary since …: no answer within 10 s (2 in a row); VLLM::EngineCore pid N is stopped`."""
    text = str(watch["verdict"])
    if watch.get("check"):
        text += f" by {watch['check']}"
    if watch.get("since"):
        text += f" since {watch['since']}"
    if watch.get("detail") and watch.get("check"):
        text += f": {watch['detail']}"
    if watch.get("process") and str(watch["process"]) not in str(watch.get("detail")):
        text += f"; {watch['process']}"
    return text


@click.command("history")
@profile_option("Only this profile.", dest="name")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Newest N records.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, as stored.")
@click.option(
    "--starts",
    is_flag=True,
    help="Compare the last starts of --profile phase by phase (vLLM's own lines; a sleeper's wake "
    "by its own phases) and name what changed.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    metavar="N",
    help="With --starts: N starts.",
)
@click.pass_obj
def history_cmd(
    options: GlobalOptions, name: str | None, limit: int, as_json: bool, starts: bool, last: int
) -> None:
    """The append-only record of starts, gate results, promotions and rollbacks, with fingerprints."""
    history = History(StateStore(options.state_dir).history_path)
    if starts:
        _show_starts(history, name, last, as_json)
        return
    records = history.read(profile=name, limit=limit)
    for record in records:
        if as_json:
            click.echo(json.dumps(record, sort_keys=True))
            continue
        extra = record.get("reason") or record.get("label") or ""
        passed = "" if "passed" not in record else (" passed" if record["passed"] else " FAILED")
        click.echo(f"{record['ts']}  {record.get('profile', '-'):<12} {record['event']:<18}{passed} {extra}")


def _show_starts(history: History, name: str | None, last: int, as_json: bool) -> None:
    """The last N starts of one profile that recorded a timeline (cold starts and wakes), side by side
    (oldest first)."""
    from launcher.logfacts.timeline_report import changes, recorded_starts, render_starts

    if name is None:
        raise BadInput("history --starts compares the starts of one profile: name it with --profile NAME")
    timed = recorded_starts(history.read(profile=name), last)
    if as_json:
        out = {"profile": name, "starts": timed, "changes": changes(timed)}
        click.echo(json.dumps(out, sort_keys=True))
        return
    if not timed:
        click.echo(
            f"no start of {name} with a timeline in the history (a start records one once vLLM served)"
        )
        return
    click.echo(render_starts(timed))
