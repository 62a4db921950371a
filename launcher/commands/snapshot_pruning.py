"""`launch set --keep N` and `launch rollback`: old snapshots and `.replaced-` copies pruned, said and
recorded (`STATE/profiles/NAME/pruned.jsonl`, which `launch rollback --list` sums).

A snapshot past the newest N is spared while a rollback would still want it: the one this `set`
just wrote, one byte-identical to the profile now (the state a rollback put back), and one that
renders the launch that serves now or the last-good one (the way back to it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from launcher.atomicfile import read_bytes_nofollow
from launcher.errors import BadInput
from launcher.profile.loader import PROFILE_SUFFIX
from launcher.profile.pruning import beyond_keep, prune_snapshots
from launcher.profile.snapshots import prune_replaced, replaced_copies
from launcher.settings import GlobalOptions
from launcher.state.pruned import record_pruned
from launcher.state.store import StateStore
from launcher.supervisor.history import utc_now
from launcher.supervisor.status import read_status


def prune_after_set(options: GlobalOptions, profile: str, bak: Path, keep: int) -> None:
    """Prune what `set` left past `keep`, then say and record what went."""
    spare = _spare(options, profile, bak, _bytes(options.profiles_dir / f"{profile}{PROFILE_SUFFIX}"))
    snapshots = prune_snapshots(options.profiles_dir, profile, keep, spare)
    replaced = prune_replaced(options.profiles_dir / f"{profile}{PROFILE_SUFFIX}", keep)
    say_and_record(options, profile, "set", keep, snapshots, replaced)


def would_prune(
    options: GlobalOptions, profile: str, bak: Path | None, keep: int, edited: bytes
) -> list[Path]:
    """What `set` would remove, for its dry run: the snapshots past `keep` once `bak` is written and
    the file is `edited`, less the spared ones, and the `.replaced-` copies past `keep`."""
    spare = _spare(options, profile, bak, edited)
    snapshots = [p for p in beyond_keep(options.profiles_dir, profile, keep, adding=bak) if not spare(p)]
    copies = replaced_copies(options.profiles_dir / f"{profile}{PROFILE_SUFFIX}")
    return snapshots + copies[: max(0, len(copies) - keep)]


def say_and_record(
    options: GlobalOptions, profile: str, by: str, keep: int, snapshots: list[Path], replaced: list[Path]
) -> None:
    if not snapshots and not replaced:
        return
    names = ", ".join(p.name for p in snapshots + replaced)
    click.echo(f"pruned  {names}  (the newest {keep} of each kind are kept)")
    try:
        record_pruned(
            StateStore(options.state_dir),
            profile,
            by=by,
            keep=keep,
            snapshots=[p.name for p in snapshots],
            replaced=[p.name for p in replaced],
            ts=utc_now(),
        )
    except OSError as err:
        click.echo(f"note:   the prune is not counted in {options.state_dir}: {err.strerror or err}")


def _spare(
    options: GlobalOptions, profile: str, bak: Path | None, now: bytes | None
) -> Callable[[Path], bool]:
    """`now`: the profile file as the change leaves it."""
    wanted = _wanted_fingerprints(options.state_dir, profile)

    def spare(path: Path) -> bool:
        if path == bak or (now is not None and _bytes(path) == now):
            return True
        return bool(wanted) and _fingerprint(options.profiles_dir, profile, path) in wanted

    return spare


def _bytes(path: Path) -> bytes | None:
    try:
        return read_bytes_nofollow(path)
    except OSError:
        return None


def _wanted_fingerprints(state_dir: Path, profile: str) -> set[str]:
    """What serves now and the last-good launch (a snapshot that renders either is a way back); an
    unreadable record adds nothing."""
    store = StateStore(state_dir)
    found = {
        _field(lambda: read_status(store.status_path(profile)), "serving_fingerprint"),
        _field(lambda: store.last_good(profile), "fingerprint"),
    }
    return {fingerprint for fingerprint in found if fingerprint is not None}


def _field(read: Callable[[], dict[str, Any] | None], key: str) -> str | None:
    try:
        value = (read() or {}).get(key)
    except BadInput:
        return None
    return value if isinstance(value, str) else None


def _fingerprint(profiles_dir: Path, profile: str, snapshot: Path) -> str | None:
    from launcher.profile.plan import build_plan

    try:
        plan = build_plan(profiles_dir, profile, top_file=snapshot)
    except BadInput:
        return None
    return None if plan.errors else plan.fingerprint()
