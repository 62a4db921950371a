"""What `launch set` shows of an edit: the file diff, the keys, the argv changes — as text, or as the
dry run's JSON (docs/profiles.md lists its keys). Every value shown is masked: a secret's value
never appears, under its own name or inside another value (issue 42)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from launcher.profile.diff import Change, diff_launches
from launcher.profile.edit import Assignment, format_value
from launcher.profile.loader import ResolvedProfile
from launcher.profile.plan import LaunchPlan
from launcher.profile.proposal import ProposalCheck
from launcher.redact import MASK, LineRedactor, is_secret_name


@dataclass(frozen=True, slots=True)
class Edit:
    original: str
    edited: str
    items: list[Assignment]
    before: LaunchPlan | None
    check: ProposalCheck
    mask: LineRedactor  # every value this edit shows under a secret's name (issue 42)


def dry_run_json(
    profile: str, path: Path, tag: str | None, keep: int, e: Edit, pruned: list[Path]
) -> dict[str, Any]:
    """The dry run as data; every value is masked as on screen."""
    changes = _argv_changes(e)
    return {
        "profile": profile,
        "file": str(path),
        "tag": tag,
        "valid": not e.check.errors,
        "diff": masked_diff(path, e),
        "keys": [{"key": key, "old": old, "new": new} for key, old, new in _key_rows(e)],
        "argv_changes": None if changes is None else [_masked(e, change) for change in changes],
        "dependents": list(e.check.dependents),
        "warnings": [e.mask(warning) for warning in e.check.warnings],
        "errors": [e.mask(error) for error in e.check.errors],
        "keep": keep,
        "would_prune": [p.name for p in pruned],
    }


def _masked(e: Edit, change: Change) -> dict[str, str | None]:
    shown = change.to_json()
    return {key: None if value is None else e.mask(value) for key, value in shown.items()}


def masked_diff(path: Path, e: Edit) -> str:
    lines = difflib.unified_diff(
        e.original.splitlines(keepends=True),
        e.edited.splitlines(keepends=True),
        fromfile=str(path),
        tofile=f"{path} (after set)",
    )
    return "".join(e.mask(line.rstrip("\n")) + "\n" for line in lines)


def print_dry_run(path: Path, e: Edit) -> None:
    diff = masked_diff(path, e)
    click.echo(diff.rstrip("\n") if diff else f"{path}: no change (it already has these values)")
    click.echo("")
    print_changes(e)
    for warning in e.check.warnings:
        click.echo(click.style("warning: ", fg="yellow") + e.mask(warning))


def print_changes(e: Edit) -> None:
    click.echo("keys:")
    for key, old, new in _key_rows(e):
        click.echo(f"  {key}: {old} → {new}")
    changes = _argv_changes(e)
    if changes is None:
        click.echo("argv changes: unknown (the profile did not render before this change)")
        return
    click.echo("argv changes:" if changes else "argv changes: none")
    for change in changes:
        for line in change.lines():
            click.echo(e.mask(f"  {line}"))
    if e.check.dependents:
        click.echo(f"also checked (they extend it): {', '.join(e.check.dependents)}")


def _key_rows(e: Edit) -> list[tuple[str, str, str]]:
    """(key, old, new) for each assignment, masked: a secret's value is never shown."""
    rows = []
    for item in e.items:
        old, new = _old_value(e.before.profile if e.before else None, item), item.text
        if is_secret_name(item.dotted):
            old, new = (old if old in ("?", "(unset)") else MASK), MASK
        rows.append((item.dotted, e.mask(old), e.mask(new)))
    return rows


def _argv_changes(e: Edit) -> list[Change] | None:
    """What the launch gains and loses (masked when printed); None when it did not render before."""
    if e.before is None:
        return None
    return diff_launches(e.before.argv, e.before.env, e.check.plan.argv, e.check.plan.env)


def _old_value(profile: ResolvedProfile | None, item: Assignment) -> str:
    if profile is None:
        return "?"
    node: Any = profile.data
    for key in item.path:
        if not isinstance(node, dict) or key not in node:
            return "(unset)"
        node = node[key]
    source = profile.source_of(item.dotted)
    origin = f" (from {source.name})" if source is not None and source != profile.files[0] else ""
    return f"{format_value(node)}{origin}"
