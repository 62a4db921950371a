"""`launch rollback TAG [--profile NAME]`: put `PROFILE.toml.bak_TAG` back, then reload and gate it.

The snapshot is rendered and validated before anything is written; the file it replaces is kept
as `PROFILE.toml.replaced-<UTC time>` (written first), so a rollback never loses an edit; the
newest twenty of those copies are kept (what goes is said, and counted by `--list`). `--list` shows
the snapshots (`rollback_list.py`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from launcher.commands.profile_arg import profile_option
from launcher.completion import rollback_tags
from launcher.errors import BadInput, ProfileInvalid
from launcher.profile.diff import diff_launches
from launcher.profile.loader import NAME_RE, PROFILE_SUFFIX
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.profile.proposal import ProposalCheck, check_proposal
from launcher.profile.snapshots import (
    KEPT,
    available_tags,
    bak_path,
    check_tag,
    prune_replaced,
    restore_snapshot,
)
from launcher.settings import GlobalOptions
from launcher.state.change_lock import ChangeLock
from launcher.state.store import StateStore

from .live_reload import DEFAULT_RELOAD_TIMEOUT_S, reload_if_running, served_profile
from .snapshot_pruning import say_and_record
from .timeout_arg import TIMEOUT_S


@click.command("rollback")
@click.argument("tag", required=False, shell_complete=rollback_tags)
@profile_option("Profile to restore [default: the one being served].")
@click.option(
    "--list", "list_only", is_flag=True, help="List the snapshots: when, what changes, what serves."
)
@click.option(
    "--json", "as_json", is_flag=True, help="With --list: one JSON object on stdout (docs/profiles.md)."
)
@click.option("--allow-unknown", is_flag=True, help="Unknown vLLM flags become warnings (for forks).")
@click.option(
    "--timeout-s",
    type=TIMEOUT_S,
    default=DEFAULT_RELOAD_TIMEOUT_S,
    show_default=True,
    help="Wait this long for the gates.",
)
@click.pass_obj
def rollback(
    options: GlobalOptions,
    tag: str | None,
    profile: str | None,
    list_only: bool,
    as_json: bool,
    allow_unknown: bool,
    timeout_s: float,
) -> None:
    """Restore PROFILE.toml from PROFILE.toml.bak_TAG and make the running launcher serve it.

    \b
    The file it replaces is kept as PROFILE.toml.replaced-<UTC time>. Without --profile the
    profile a running launcher serves is used. Exit code: the gates' verdict (0, 1 or 3).
      launch rollback gdn_off --profile prod
      launch rollback --list --profile prod [--json]
    """
    if list_only or tag is None:
        _list_or_refuse(options, tag, profile, list_only, as_json)
        return
    if as_json:
        raise BadInput("--json goes with --list", hint="`launch rollback --list --json --profile NAME`")
    code = run_rollback(options, tag, profile, allow_unknown=allow_unknown, timeout_s=timeout_s)
    click.get_current_context().exit(code)


def _list_or_refuse(
    options: GlobalOptions, tag: str | None, profile: str | None, list_only: bool, as_json: bool
) -> None:
    from .rollback_list import list_snapshots

    if not list_only or tag is not None:
        raise BadInput(
            "`launch rollback` takes a TAG to restore, or --list (not both)",
            hint="`launch rollback --list --profile NAME` shows the tags",
        )
    name = profile if profile is not None else served_profile(options.state_dir)
    if not NAME_RE.match(name):
        raise BadInput(f"invalid profile name {name!r}", hint="use letters, digits, '-', '_' and '.'")
    list_snapshots(options, name, as_json=as_json)


def run_rollback(
    options: GlobalOptions,
    tag: str,
    profile: str | None,
    *,
    allow_unknown: bool = False,
    timeout_s: float = DEFAULT_RELOAD_TIMEOUT_S,
    now: datetime | None = None,
) -> int:
    check_tag(tag)
    name = profile if profile is not None else served_profile(options.state_dir)
    if not NAME_RE.match(name):
        raise BadInput(f"invalid profile name {name!r}", hint="use letters, digits, '-', '_' and '.'")
    _checked_snapshot(options.profiles_dir, name, tag, allow_unknown)  # refused before the lock is made
    with ChangeLock(StateStore(options.state_dir), name, f"launch rollback {tag} --profile {name}"):
        return _rollback(options, tag, name, allow_unknown, timeout_s, now or datetime.now(UTC))


def _rollback(
    options: GlobalOptions, tag: str, name: str, allow_unknown: bool, timeout_s: float, now: datetime
) -> int:
    """The snapshot checked, put back and reloaded, inside the profile's change lock."""
    profiles_dir = options.profiles_dir
    bak, data, check = _checked_snapshot(profiles_dir, name, tag, allow_unknown)
    target = profiles_dir / f"{name}{PROFILE_SUFFIX}"
    if target.is_file() and target.read_bytes() == data:
        click.echo(f"{target} is already identical to {bak.name}; nothing was written")
    else:
        _restore(options, name, target, bak, allow_unknown, now, check.plan)
    return reload_if_running(options.state_dir, name, timeout_s)


def _checked_snapshot(
    profiles_dir: Path, name: str, tag: str, allow_unknown: bool
) -> tuple[Path, bytes, ProposalCheck]:
    bak = bak_path(profiles_dir, name, tag)
    if not bak.is_file():
        raise _missing_snapshot(profiles_dir, name, bak)
    data = bak.read_bytes()
    check = check_proposal(profiles_dir, name, data, shown_as=bak, allow_unknown=allow_unknown)
    if check.errors:
        raise ProfileInvalid(
            f"{bak} does not render into a valid launch ({len(check.errors)} error(s)); nothing was restored",
            list(check.errors),
            hint="fix that file by hand, or pick another tag",
        )
    return bak, data, check


def _restore(
    options: GlobalOptions,
    name: str,
    target: Path,
    bak: Path,
    allow_unknown: bool,
    now: datetime,
    restored: LaunchPlan,
) -> None:
    try:
        before = (
            build_plan(options.profiles_dir, name, allow_unknown=allow_unknown) if target.is_file() else None
        )
    except BadInput:
        before = None  # the file being replaced may be the broken one
    kept = restore_snapshot(target, bak, now)
    click.echo(f"restored {target} from {bak.name}")
    if kept is not None:
        click.echo(f"kept     {kept}  (the file it replaced)")
    say_and_record(options, name, "rollback", KEPT, [], prune_replaced(target))
    if before is not None:
        changes = diff_launches(before.argv, before.env, restored.argv, restored.env)
        click.echo("argv changes:" if changes else "argv changes: none")
        for change in changes:
            for line in change.lines():
                click.echo(f"  {line}")


def _missing_snapshot(profiles_dir: Path, name: str, bak: Path) -> BadInput:
    tags = available_tags(profiles_dir, name)
    listing = (
        f"tags for {name!r}, newest first: {', '.join(tags)}"
        if tags
        else f"{name!r} has no .bak_<tag> snapshot"
    )
    return BadInput(f"no snapshot {bak}", hint=listing)
