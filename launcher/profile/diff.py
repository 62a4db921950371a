"""What changed between two rendered launches, flag by flag and variable by variable."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from launcher.redact import redact_argv, redact_env


@dataclass(frozen=True, slots=True)
class Change:
    kind: str  # "added" | "removed" | "changed"
    what: str  # "--max-num-seqs" or "env VLLM_X"
    old: str | None
    new: str | None

    def lines(self) -> list[str]:
        out = []
        if self.old is not None:
            out.append(f"- {self.what} {self.old}".rstrip())
        if self.new is not None:
            out.append(f"+ {self.what} {self.new}".rstrip())
        return out

    def to_json(self) -> dict[str, str | None]:
        return {"kind": self.kind, "what": self.what, "old": self.old, "new": self.new}


def flag_groups(argv: Sequence[str]) -> dict[str, str]:
    """argv → {"<program>": "vllm serve MODEL", "--flag": "values..."}; order-insensitive."""
    groups: dict[str, str] = {}
    head: list[str] = []
    current: str | None = None
    values: list[str] = []
    for token in argv:
        if token.startswith("--") or (token.startswith("-") and len(token) > 1 and not _is_number(token)):
            if current is not None:
                groups[current] = shlex.join(values)
            current, values = token, []
        elif current is None:
            head.append(token)
        else:
            values.append(token)
    if current is not None:
        groups[current] = shlex.join(values)
    groups["<command>"] = shlex.join(head)
    return groups


def diff_launches(
    old_argv: Sequence[str], old_env: dict[str, str], new_argv: Sequence[str], new_env: dict[str, str]
) -> list[Change]:
    old_argv, new_argv = redact_argv(old_argv), redact_argv(new_argv)  # diffs are printed
    changes = _diff_maps(flag_groups(old_argv), flag_groups(new_argv), prefix="")
    changes += _diff_maps(redact_env(old_env), redact_env(new_env), prefix="env ")
    return changes


def _diff_maps(old: dict[str, str], new: dict[str, str], prefix: str) -> list[Change]:
    changes = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        kind = "added" if before is None else "removed" if after is None else "changed"
        changes.append(Change(kind, prefix + key, before, after))
    return changes


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
