"""`launch set [--profile] PROFILE key=value… --tag TAG`: edit a profile in place, keeping a `.bak_TAG` first.

Order matters for "nothing written on bad input": every argument is parsed, the edit is made in
memory and the result is rendered and validated (with the profiles that extend this one) before
the snapshot and then the profile are written, each atomically.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from launcher.commands.profile_arg import profile_option
from launcher.completion import set_words
from launcher.errors import BadInput, ExitCode, ProfileInvalid
from launcher.profile.edit import (
    apply_assignments,
    match_spelling,
    parse_assignment,
)
from launcher.profile.loader import link_note, profile_path, read_toml
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.profile.proposal import check_proposal
from launcher.profile.snapshots import KEPT, bak_path, check_tag, refuse_existing, save_and_write
from launcher.redact import LineRedactor, secrets_in
from launcher.settings import GlobalOptions
from launcher.state.change_lock import ChangeLock
from launcher.state.store import StateStore

from .live_reload import DEFAULT_RELOAD_TIMEOUT_S, note_if_running, reload_if_running
from .profile_arg import profile_and_assignments
from .set_report import Edit, dry_run_json, print_changes, print_dry_run
from .snapshot_pruning import prune_after_set, would_prune
from .timeout_arg import TIMEOUT_S


@click.command("set")
@click.argument("words", nargs=-1, required=True, metavar="[PROFILE] KEY=VALUE...", shell_complete=set_words)
@profile_option("Profile to change (or give it first, as before).", dest="profile_option")
@click.option("--tag", metavar="TAG", help="Keep the profile as it was in PROFILE.toml.bak_TAG (required).")
@click.option("--force-tag", is_flag=True, help="Replace an existing PROFILE.toml.bak_TAG.")
@click.option("--dry-run", is_flag=True, help="Show the file diff and the argv changes; write nothing.")
@click.option(
    "--json", "as_json", is_flag=True, help="With --dry-run: one JSON object on stdout (docs/profiles.md)."
)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=KEPT,
    show_default=True,
    help="Keep the newest N snapshots (and .replaced- copies) of the profile; older ones are removed, "
    "except those a rollback may still want (what serves, last-good, the file now).",
)
@click.option(
    "--apply", "apply_now", is_flag=True, help="Then reload the running launcher and wait for the gates."
)
@click.option("--allow-unknown", is_flag=True, help="Unknown vLLM flags become warnings (for forks).")
@click.option(
    "--timeout-s",
    type=TIMEOUT_S,
    default=DEFAULT_RELOAD_TIMEOUT_S,
    show_default=True,
    help="With --apply: wait this long.",
)
@click.pass_obj
def set_command(
    options: GlobalOptions,
    words: tuple[str, ...],
    profile_option: str | None,
    tag: str | None,
    force_tag: bool,
    dry_run: bool,
    as_json: bool,
    keep: int,
    apply_now: bool,
    allow_unknown: bool,
    timeout_s: float,
) -> None:
    """Change keys of a profile; the file as it was is kept as PROFILE.toml.bak_TAG.

    \b
    A bare key is a vLLM flag of [args]; env.NAME, engine.KEY and gates.NAME.KEY address the other
    tables; dotted keys reach into inline tables. Values are TOML; a bare word is a string.
      launch set --profile prod max_num_seqs=16 --tag seqs16
      launch set --profile prod env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=1 --tag gdn_on --apply
      launch set --profile fable-27b compilation_config.cudagraph_capture_sizes=[1,2,4] --dry-run
    The older `launch set prod max_num_seqs=16 …` still works. Undo with `launch rollback TAG
    --profile PROFILE`. The newest --keep snapshots stay; older ones go, said and counted by
    `launch rollback --list` (never one that renders what serves or last-good).
    """
    profile, assignments = profile_and_assignments(profile_option, words)
    if not assignments:
        raise BadInput("`launch set` needs at least one KEY=VALUE", hint="e.g. max_num_seqs=16")
    if as_json and not dry_run:
        raise BadInput(
            "--json describes a dry run, and without --dry-run `launch set` writes the profile",
            hint=f"to see the change as JSON: `launch set --profile {profile} KEY=VALUE --dry-run --json`",
        )
    code = run_set(
        options,
        profile,
        assignments,
        tag=tag,
        force_tag=force_tag,
        dry_run=dry_run,
        as_json=as_json,
        keep=keep,
        apply_now=apply_now,
        allow_unknown=allow_unknown,
        timeout_s=timeout_s,
    )
    click.get_current_context().exit(code)


def run_set(
    options: GlobalOptions,
    profile: str,
    assignments: Sequence[str],
    *,
    tag: str | None,
    force_tag: bool = False,
    dry_run: bool = False,
    as_json: bool = False,
    keep: int = KEPT,
    apply_now: bool = False,
    allow_unknown: bool = False,
    timeout_s: float = DEFAULT_RELOAD_TIMEOUT_S,
) -> int:
    path = profile_path(options.profiles_dir, profile)  # the name is checked before any path is made
    request = _SetRequest(
        options, profile, path, tuple(assignments), tag, force_tag, allow_unknown, timeout_s, keep
    )
    if dry_run:
        return _dry_run(request, as_json=as_json)
    # Bad input is refused before the change lock creates anything; inside it, the edit is made again
    # from the file as it is then (another change may have ended in between).
    _snapshot_target(options.profiles_dir, profile, tag, force_tag=force_tag, dry_run=False)
    _raise_for_errors(path, profile, _edit(request), dry_run=False)
    keys = ", ".join(given.partition("=")[0] for given in assignments)  # names only: values may be secrets
    command = f"launch set {profile} ({keys}){' --apply' if apply_now else ''}"
    with ChangeLock(StateStore(options.state_dir), profile, command):
        return _set(request, apply_now)


@dataclass(frozen=True, slots=True)
class _SetRequest:
    options: GlobalOptions
    profile: str
    path: Path
    assignments: tuple[str, ...]
    tag: str | None
    force_tag: bool
    allow_unknown: bool
    timeout_s: float
    keep: int


def _edit(r: _SetRequest) -> Edit:
    """The edit made in memory and checked (with the profiles that extend this one); nothing written."""
    document = read_toml(r.path)  # a syntax error is reported as file:line:col before anything else
    before = _current_plan(r.options.profiles_dir, r.profile, r.allow_unknown)
    args_now = before.args if before is not None else document.get("args")
    args_keys = list(args_now) if isinstance(args_now, dict) else []
    items = match_spelling([parse_assignment(given) for given in r.assignments], args_keys)
    original = r.path.read_bytes().decode("utf-8")
    edited = apply_assignments(original, items, where=str(r.path))
    check = check_proposal(
        r.options.profiles_dir,
        r.profile,
        edited.encode("utf-8"),
        shown_as=r.path,
        allow_unknown=r.allow_unknown,
    )
    return Edit(original, edited, items, before, check, _mask_for(document, edited, before))


def _mask_for(document: dict[str, Any], edited: str, before: LaunchPlan | None) -> LineRedactor:
    """Masks the secrets of the file before and after the edit and of what it inherits (both plans
    rendered first: they note the variable engine.api_key_env names)."""
    inherited = before.profile.data if before is not None else {}
    return LineRedactor([*secrets_in(document), *secrets_in(tomllib.loads(edited)), *secrets_in(inherited)])


def _dry_run(r: _SetRequest, *, as_json: bool) -> int:
    bak = _snapshot_target(r.options.profiles_dir, r.profile, r.tag, force_tag=r.force_tag, dry_run=True)
    e = _edit(r)
    changed = e.edited != e.original
    pruned = would_prune(r.options, r.profile, bak, r.keep, e.edited.encode("utf-8")) if changed else []
    if as_json:
        shown = dry_run_json(r.profile, r.path, r.tag, r.keep, e, pruned)
        click.echo(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        _say_where_the_profile_is(r.options.profiles_dir, r.path)
        print_dry_run(r.path, e)
        if pruned:
            names = ", ".join(p.name for p in pruned)
            click.echo(f"prune:  would remove {names} (the newest {r.keep} of each kind are kept; --keep)")
    _raise_for_errors(r.path, r.profile, e, dry_run=True)
    if not as_json:
        click.echo("dry run: valid; nothing was written")
    return int(ExitCode.OK)


def _set(r: _SetRequest, apply_now: bool) -> int:
    bak = _snapshot_target(r.options.profiles_dir, r.profile, r.tag, force_tag=r.force_tag, dry_run=False)
    e = _edit(r)
    _raise_for_errors(r.path, r.profile, e, dry_run=False)
    if e.edited == e.original:
        click.echo(
            f"{r.path} already has these values; nothing was written (no {bak.name if bak else 'snapshot'})"
        )
        return int(ExitCode.OK)
    assert bak is not None and r.tag is not None
    save_and_write(r.path, bak, e.edited, force=r.force_tag)
    click.echo(f"saved   {bak}  (the profile as it was)")
    click.echo(f"wrote   {r.path}")
    _say_where_the_profile_is(r.options.profiles_dir, r.path)
    print_changes(e)
    prune_after_set(r.options, r.profile, bak, r.keep)
    undo = f"launch rollback {shlex.quote(r.tag)} --profile {shlex.quote(r.profile)}"
    click.echo(f"undo:   {undo}")
    if apply_now:
        code = reload_if_running(r.options.state_dir, r.profile, r.timeout_s)
        if code != ExitCode.OK:
            _say_the_file_keeps_the_change(r.path, r.profile, e.check.dependents, undo)
        return code
    note_if_running(r.options.state_dir, r.profile, f"add --apply next time, or run `{undo}` to go back")
    return int(ExitCode.OK)


def _say_where_the_profile_is(profiles_dir: Path, path: Path) -> None:
    note = link_note(profiles_dir, path)
    if note is not None:
        click.echo(f"note:   {note}")


def _say_the_file_keeps_the_change(path: Path, profile: str, dependents: tuple[str, ...], undo: str) -> None:
    """A change the launcher did not take stays written: the next start serves it again, and every
    profile that extends this one inherits it (on the H200, a rejected tool parser reached two child
    profiles this way: docs/real-vllm.md, issue 22). Say so, with the way back."""
    heirs = f" and what {', '.join(dependents)} inherit" if dependents else ""
    click.echo(
        f"  the file keeps the change: {path.name} is what the next start of {profile!r} serves{heirs}; "
        f"to put it back as it was: {undo} (it restarts nothing when that launch is the one serving)"
    )


def _snapshot_target(
    profiles_dir: Path, profile: str, tag: str | None, *, force_tag: bool, dry_run: bool
) -> Path | None:
    if tag is None:
        if dry_run:
            return None
        raise BadInput(
            f"--tag is required: `launch set` keeps {profile}.toml as it was in {profile}.toml.bak_TAG",
            hint="for example --tag before_seqs16; preview without a tag with --dry-run",
        )
    bak = bak_path(profiles_dir, profile, check_tag(tag))
    if bak.exists() and not force_tag:
        raise refuse_existing(bak)
    return bak


def _current_plan(profiles_dir: Path, profile: str, allow_unknown: bool) -> LaunchPlan | None:
    """The profile as it renders now; None when it does not (`set` may be what fixes it)."""
    try:
        return build_plan(profiles_dir, profile, allow_unknown=allow_unknown)
    except BadInput:
        return None


def _raise_for_errors(path: Path, profile: str, e: Edit, *, dry_run: bool) -> None:
    check = e.check
    if not check.errors:
        return
    raise ProfileInvalid(
        f"{path}: this change would leave {len(check.errors)} error(s) in profile {profile!r}"
        + (" or the profiles that extend it; " if check.dependents else "; ")
        + ("this was a dry run" if dry_run else "nothing was written"),
        [e.mask(error) for error in check.errors],
        hint=f"fix the value, or check it with `launch set {profile} ... --dry-run`",
    )
