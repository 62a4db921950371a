"""What pruning removed from the profiles dir: `STATE/profiles/NAME/pruned.jsonl`, one line a prune.

`launch set` keeps the newest `--keep` snapshots of a profile and `launch rollback` its newest
`.replaced-` copies; each prune that removed something appends when, by which command, how many it
kept and the names it removed, so `launch rollback --list` can say how many went, and an operator who
misses a snapshot can see when it went. An append-only file of its own, not history.jsonl: the
history is the engines' record (starts, gates, promotions) that `launch logs`, `status` and the
benches read, and `--list` needs this profile's prunes only. Not a count: a count is rewritten in
place (a lost write forgets every prune before it) and cannot say which files went. A line that
cannot be read is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from launcher.atomicfile import append_line, read_bytes_nofollow
from launcher.state.store import StateStore


@dataclass(frozen=True, slots=True)
class PrunedSoFar:
    """The sum of a profile's prunes; `problem`: why the record could not be read (the sums are 0)."""

    snapshots: int = 0
    replaced: int = 0
    last: str | None = None  # when the newest prune was
    problem: str | None = None


def record_pruned(
    store: StateStore,
    profile: str,
    *,
    by: str,
    keep: int,
    snapshots: Sequence[str],
    replaced: Sequence[str],
    ts: str,
) -> None:
    """Append one prune (OSError when the state dir takes no write: the caller says so)."""
    line = {"ts": ts, "by": by, "keep": keep, "snapshots": list(snapshots), "replaced": list(replaced)}
    append_line(store.pruned_path(profile), json.dumps(line, sort_keys=True))


def pruned_so_far(store: StateStore, profile: str) -> PrunedSoFar:
    path = store.pruned_path(profile)
    try:
        raw = read_bytes_nofollow(path)
    except FileNotFoundError:
        return PrunedSoFar()
    except OSError as err:
        return PrunedSoFar(problem=f"{path}: {err.strerror or err}")
    snapshots = replaced = 0
    last = None
    for line in raw.split(b"\n"):
        record = _record(line)
        if record is not None:
            snapshots, replaced = snapshots + len(record["snapshots"]), replaced + len(record["replaced"])
            last = str(record["ts"])
    return PrunedSoFar(snapshots, replaced, last)


def _record(line: bytes) -> dict[str, list[str] | str] | None:
    try:
        data = json.loads(line)
    except ValueError:  # a blank line, a torn one, bytes that are not UTF-8
        return None
    if not isinstance(data, dict) or not isinstance(data.get("ts"), str):
        return None
    if not all(isinstance(data.get(key), list) for key in ("snapshots", "replaced")):
        return None
    return data
