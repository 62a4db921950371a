"""`launch status` and `launch history`: what runs now, and what happened."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
import psutil

from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.history import History
from launcher.supervisor.status import read_status


@click.command("status")
@click.option("--profile", "name", metavar="NAME", help="One profile (default: every profile with a status).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (a list without --profile).")
@click.pass_obj
def status_cmd(options: GlobalOptions, name: str | None, as_json: bool) -> None:
    """What runs now: phase, profile, engine pid, uptime, the last gates, why the last rollback happened."""
    store = StateStore(options.state_dir)
    names = [name] if name else sorted(p.name for p in (store.root / "profiles").glob("*") if p.is_dir())
    statuses = [s for s in (_status(store, n) for n in names) if s is not None]
    if as_json:
        payload: Any = statuses[0] if name and statuses else statuses
        click.echo(json.dumps(payload if payload else {"phase": "stopped", "profile": name}, indent=2))
        return
    if not statuses:
        click.echo(
            "nothing has run yet" + (f" for profile {name!r}" if name else "") + f" (state dir {store.root})"
        )
        return
    for status in statuses:
        click.echo(_human(status))


def _status(store: StateStore, name: str) -> dict[str, Any] | None:
    status = read_status(store.profile_dir(name) / "status.json")
    if status is None:
        return None
    alive = psutil.pid_exists(int(status.get("launcher_pid", 0) or 0))
    status["launcher_alive"] = alive
    if not alive and status.get("phase") not in ("stopped", "failed"):
        status["detail"] = f"launcher pid {status.get('launcher_pid')} is gone (last phase {status['phase']})"
        status["phase"] = "stopped"
    if not alive and status.get("engine_pid"):
        status["engine_pid"] = None  # the launcher is gone: its engine pid may be anyone's by now
    if status.get("phase") in ("serving", "serving_last_good"):  # last-good is what serves
        status.update(_endpoint((store.last_good(name) or {}).get("argv")))
    status["engine_log"] = str(store.profile_dir(name) / "logs" / "engine.log")  # `launch logs NAME` reads it
    started = status.get("engine_started_at")
    status["uptime_s"] = _age(started) if alive and started and status.get("engine_pid") else None
    return status


def _endpoint(argv: object) -> dict[str, str]:
    """URL and model of the promoted launch, from its recorded argv (vLLM's defaults filled in)."""
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return {}

    def after(flag: str) -> str | None:
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else None

    host = after("--host") or "0.0.0.0"
    model = after("--served-model-name") or (argv[argv.index("serve") + 1] if "serve" in argv[:-1] else None)
    shown = {"url": f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{after('--port') or 8000}"}
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
    "serving_fingerprint": "serving candidate",
    "engine_pid": "vLLM pid",
    "uptime_s": "up (s)",
    "rollback_reason": "last rollback because",
    "detail": "detail",
    "engine_log": "vLLM log",
}


def _human(status: dict[str, Any]) -> str:
    lines = [f"{status['profile']}: {status['phase']}"]
    for key, label in LABELS.items():
        if status.get(key) is not None:
            lines.append(f"  {label}: {status[key]}")
    for gate in status.get("gates") or []:
        lines.append(f"  gate {gate['name']}: {gate['verdict']} — {gate['summary']}")
    return "\n".join(lines)


@click.command("history")
@click.option("--profile", "name", metavar="NAME", help="Only this profile.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Newest N records.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, as stored.")
@click.pass_obj
def history_cmd(options: GlobalOptions, name: str | None, limit: int, as_json: bool) -> None:
    """The append-only record of starts, gate results, promotions and rollbacks, with fingerprints."""
    records = History(StateStore(options.state_dir).history_path).read(profile=name, limit=limit)
    for record in records:
        if as_json:
            click.echo(json.dumps(record, sort_keys=True))
            continue
        extra = record.get("reason") or record.get("label") or ""
        passed = "" if "passed" not in record else (" passed" if record["passed"] else " FAILED")
        click.echo(f"{record['ts']}  {record.get('profile', '-'):<12} {record['event']:<18}{passed} {extra}")
