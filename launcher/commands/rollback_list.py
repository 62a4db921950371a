"""`launch rollback --list`: every `.bak_<tag>` of a profile, newest first, with when it was saved,
what rolling back to it would change in the launch, which one (if any) is what serves now, and how
many old snapshots pruning has removed so far (`STATE/profiles/NAME/pruned.jsonl`).

Each snapshot is rendered as `launch rollback` would render it (`build_plan` with the snapshot as
the top file), so the fingerprint compared with `status.json`'s `serving_fingerprint` is the one a
rollback would start; a snapshot that no longer renders says so instead. `--json` prints the same as
one object (docs/profiles.md lists its keys).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from launcher.errors import BadInput
from launcher.profile.diff import Change, diff_launches
from launcher.profile.loader import PROFILE_SUFFIX, profile_path
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.profile.snapshots import available_tags, bak_path
from launcher.settings import GlobalOptions
from launcher.state.pruned import PrunedSoFar, pruned_so_far
from launcher.state.store import StateStore
from launcher.supervisor.status import read_status

SHOWN_CHANGES = 6  # per snapshot; the dry run of `launch rollback` shows them all


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot as the list shows it: `plan` is its launch, or why it does not render."""

    profile: str
    tag: str
    path: Path
    saved: datetime
    plan: LaunchPlan | str
    changes: list[Change] | None  # against the file now; None when either does not render


def list_snapshots(options: GlobalOptions, name: str, *, as_json: bool = False) -> None:
    tags = available_tags(options.profiles_dir, name)
    if not tags:
        # neither a snapshot nor a profile: exit 2 naming the profiles there, as `launch rollback TAG`
        # and `set` answer it (a listing of nothing, exit 0, hid a typo; issue 42)
        profile_path(options.profiles_dir, name)
    now = _plan(options.profiles_dir, name, None)
    snapshots = [_snapshot(options.profiles_dir, name, tag, now) for tag in tags]
    serving = _serving(options.state_dir, name)  # (fingerprint, phase) while it serves
    store = StateStore(options.state_dir)
    pruned = pruned_so_far(store, name)
    if as_json:
        shown = _as_json(options, name, now, snapshots, serving, pruned)
        click.echo(json.dumps(shown, indent=2, ensure_ascii=False))
        return
    click.echo(f"snapshots of {name!r}, newest first (restore one: launch rollback TAG --profile {name})")
    if not tags:
        click.echo(f"  none: `launch set --profile {name} KEY=VALUE --tag TAG` keeps one before each change")
    width = max((len(tag) for tag in tags), default=0)
    for snapshot in snapshots:
        click.echo(_describe(snapshot, width, serving))
    rendered = f"renders {name}@{now.fingerprint()}" if isinstance(now, LaunchPlan) else now
    file_now = f"the file now ({name}{PROFILE_SUFFIX}) {rendered}"
    what = f"{name}@{serving[0]} ({serving[1]})" if serving else "nothing (no launcher serves it)"
    click.echo(f"serving: {what}; {file_now}")
    click.echo(_pruned_line(pruned, store.pruned_path(name)))


def _snapshot(profiles_dir: Path, name: str, tag: str, now: LaunchPlan | str) -> Snapshot:
    bak = bak_path(profiles_dir, name, tag)
    saved = datetime.fromtimestamp(bak.stat().st_mtime, UTC)
    plan = _plan(profiles_dir, name, bak)
    changes = None
    if isinstance(plan, LaunchPlan) and isinstance(now, LaunchPlan):
        changes = diff_launches(now.argv, now.env, plan.argv, plan.env)
    return Snapshot(name, tag, bak, saved, plan, changes)


def _describe(snapshot: Snapshot, width: int, serving: tuple[str, str] | None) -> str:
    tag, plan = snapshot.tag.ljust(width), snapshot.plan
    saved = snapshot.saved.strftime("%Y-%m-%d %H:%M:%S UTC")
    if not isinstance(plan, LaunchPlan):
        return f"  {tag}  saved {saved}  {plan}: `launch rollback {snapshot.tag}` would refuse it"
    fingerprint = plan.fingerprint()
    serves = "  ← serves now" if serving is not None and fingerprint == serving[0] else ""
    lines = [f"  {tag}  saved {saved}  {snapshot.profile}@{fingerprint}{serves}"]
    changes = snapshot.changes
    if changes is None:
        return lines[0]
    if not changes:
        lines.append("      the same launch as the file now")
    for change in changes[:SHOWN_CHANGES]:
        lines.append(f"      {change.what}: {change.old or '(absent)'} → {change.new or '(absent)'}")
    if len(changes) > SHOWN_CHANGES:
        lines.append(f"      … and {len(changes) - SHOWN_CHANGES} more")
    return "\n".join(lines)


def _pruned_line(pruned: PrunedSoFar, record: Path) -> str:
    if pruned.problem is not None:
        return f"pruned so far: unknown ({pruned.problem})"
    if not pruned.snapshots and not pruned.replaced:
        return "pruned so far: none (`launch set --keep N` keeps the newest N snapshots, 20 by default)"
    snapshots = f"{pruned.snapshots} older snapshot{'' if pruned.snapshots == 1 else 's'}"
    replaced = f"{pruned.replaced} .replaced- cop{'y' if pruned.replaced == 1 else 'ies'}"
    return f"pruned so far: {snapshots} and {replaced}, the last at {pruned.last} (which ones: {record})"


def _as_json(
    options: GlobalOptions,
    name: str,
    now: LaunchPlan | str,
    snapshots: list[Snapshot],
    serving: tuple[str, str] | None,
    pruned: PrunedSoFar,
) -> dict[str, Any]:
    """Stable keys: the snapshots newest first, the file now, what serves, and the prunes so far."""
    return {
        "profile": name,
        "snapshots": [_snapshot_json(s, serving) for s in snapshots],
        "file_now": {
            "file": str(options.profiles_dir / f"{name}{PROFILE_SUFFIX}"),
            **_plan_json(now),
        },
        "serving": {"fingerprint": serving[0], "phase": serving[1]} if serving else None,
        "pruned": {
            "snapshots": pruned.snapshots,
            "replaced": pruned.replaced,
            "last": pruned.last,
            "record": str(StateStore(options.state_dir).pruned_path(name)),
            "problem": pruned.problem,
        },
    }


def _snapshot_json(snapshot: Snapshot, serving: tuple[str, str] | None) -> dict[str, Any]:
    shown = _plan_json(snapshot.plan)
    return {
        "tag": snapshot.tag,
        "file": str(snapshot.path),
        "saved": snapshot.saved.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **shown,
        "serves_now": serving is not None and shown["fingerprint"] == serving[0],
        "changes": None if snapshot.changes is None else [c.to_json() for c in snapshot.changes],
    }


def _plan_json(plan: LaunchPlan | str) -> dict[str, Any]:
    if isinstance(plan, LaunchPlan):
        return {"fingerprint": plan.fingerprint(), "problem": None}
    return {"fingerprint": None, "problem": plan}


def _plan(profiles_dir: Path, name: str, top_file: Path | None) -> LaunchPlan | str:
    """The launch a file renders into, or why it does not."""
    try:
        plan = build_plan(profiles_dir, name, top_file=top_file)
    except BadInput as err:
        return f"does not render ({err.message})"
    if plan.errors:
        return f"does not render ({len(plan.errors)} error(s))"
    return plan


def _serving(state_dir: Path, name: str) -> tuple[str, str] | None:
    """(fingerprint, phase) from the profile's status, while it serves."""
    try:
        status = read_status(StateStore(state_dir).status_path(name)) or {}
    except BadInput:
        return None
    fingerprint, phase = status.get("serving_fingerprint"), status.get("phase")
    if not fingerprint or phase not in ("serving", "serving_last_good"):
        return None
    return str(fingerprint), str(phase)
