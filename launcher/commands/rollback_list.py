"""`launch rollback --list`: every `.bak_<tag>` of a profile, newest first, with when it was saved,
what rolling back to it would change in the launch, and which one (if any) is what serves now.

Each snapshot is rendered as `launch rollback` would render it (`build_plan` with the snapshot as
the top file), so the fingerprint compared with `status.json`'s `serving_fingerprint` is the one a
rollback would start; a snapshot that no longer renders says so instead.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from launcher.errors import BadInput
from launcher.profile.diff import diff_launches
from launcher.profile.loader import PROFILE_SUFFIX, profile_path
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.profile.snapshots import available_tags, bak_path
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.status import read_status

SHOWN_CHANGES = 6  # per snapshot; the dry run of `launch rollback` shows them all


def list_snapshots(options: GlobalOptions, name: str) -> None:
    tags = available_tags(options.profiles_dir, name)
    if not tags:
        # neither a snapshot nor a profile: exit 2 naming the profiles there, as `launch rollback TAG`
        # and `set` answer it (a listing of nothing, exit 0, hid a typo; issue 42)
        profile_path(options.profiles_dir, name)
    now = _plan(options.profiles_dir, name, None)
    serving = _serving(options.state_dir, name)  # (fingerprint, phase) while it serves
    click.echo(f"snapshots of {name!r}, newest first (restore one: launch rollback TAG --profile {name})")
    if not tags:
        click.echo(f"  none: `launch set --profile {name} KEY=VALUE --tag TAG` keeps one before each change")
    width = max((len(tag) for tag in tags), default=0)
    for tag in tags:
        click.echo(_describe(options.profiles_dir, name, tag.ljust(width), now, serving))
    rendered = f"renders {name}@{now.fingerprint()}" if isinstance(now, LaunchPlan) else now
    file_now = f"the file now ({name}{PROFILE_SUFFIX}) {rendered}"
    what = f"{name}@{serving[0]} ({serving[1]})" if serving else "nothing (no launcher serves it)"
    click.echo(f"serving: {what}; {file_now}")


def _describe(
    profiles_dir: Path, name: str, tag: str, now: LaunchPlan | str, serving: tuple[str, str] | None
) -> str:
    bak = bak_path(profiles_dir, name, tag.rstrip())
    saved = datetime.fromtimestamp(bak.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    plan = _plan(profiles_dir, name, bak)
    if not isinstance(plan, LaunchPlan):
        return f"  {tag}  saved {saved}  {plan}: `launch rollback {tag.rstrip()}` would refuse it"
    fingerprint = plan.fingerprint()
    serves = "  ← serves now" if serving is not None and fingerprint == serving[0] else ""
    lines = [f"  {tag}  saved {saved}  {name}@{fingerprint}{serves}"]
    if not isinstance(now, LaunchPlan):
        return lines[0]
    changes = diff_launches(now.argv, now.env, plan.argv, plan.env)
    if not changes:
        lines.append("      the same launch as the file now")
    for change in changes[:SHOWN_CHANGES]:
        lines.append(f"      {change.what}: {change.old or '(absent)'} → {change.new or '(absent)'}")
    if len(changes) > SHOWN_CHANGES:
        lines.append(f"      … and {len(changes) - SHOWN_CHANGES} more")
    return "\n".join(lines)


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
