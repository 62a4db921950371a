"""Check a proposed text of a profile file before it replaces the real one.

The proposal is rendered in a scratch copy of the profiles directory, so the real one is never
touched, and so the profiles that extend this one are checked too: an edit of `base` that breaks
`spark` is refused like an edit that breaks `base` itself. A dependent's errors that were there
before the change are not blamed on it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import BadInput
from launcher.profile.loader import PROFILE_SUFFIX, available_profiles, resolve
from launcher.profile.plan import LaunchPlan, build_plan


@dataclass(frozen=True, slots=True)
class ProposalCheck:
    """`plan` renders the proposal (its file paths point into a scratch dir that is gone)."""

    plan: LaunchPlan
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    dependents: tuple[str, ...]  # profiles that extend this one, checked with it


@dataclass(frozen=True, slots=True)
class _Paths:
    """Messages speak of the real files, never of the scratch copy."""

    scratch: Path
    real: Path
    proposed_file: Path
    shown_as: Path

    def __call__(self, message: str) -> str:
        message = message.replace(str(self.proposed_file), str(self.shown_as))
        return message.replace(str(self.scratch), str(self.real))


def check_proposal(
    profiles_dir: Path, name: str, data: bytes, *, shown_as: Path, allow_unknown: bool = False
) -> ProposalCheck:
    """Render `data` as profile `name`; `shown_as` is the file messages name (the profile, a .bak)."""
    with tempfile.TemporaryDirectory(prefix="vllm-gate-proposal-") as tmp:
        scratch = Path(tmp)
        for path in profiles_dir.glob(f"*{PROFILE_SUFFIX}"):
            if path.is_file():
                shutil.copyfile(path, scratch / path.name)
        proposed_file = scratch / f"{name}{PROFILE_SUFFIX}"
        proposed_file.write_bytes(data)
        rename = _Paths(scratch, profiles_dir, proposed_file, shown_as)
        try:
            plan = build_plan(scratch, name, allow_unknown=allow_unknown)
        except BadInput as err:
            raise BadInput(rename(err.message), hint=err.hint) from err
        errors = [rename(e) for e in plan.errors]
        dependents = _dependents(scratch, name)
        as_real = _Paths(scratch, profiles_dir, proposed_file, profiles_dir / proposed_file.name)
        for dependent in dependents:
            errors += _new_errors(profiles_dir, scratch, dependent, name, as_real, allow_unknown)
        return ProposalCheck(
            plan=plan,
            errors=tuple(errors),
            warnings=tuple(rename(w) for w in plan.warnings),
            dependents=tuple(dependents),
        )


def _dependents(profiles_dir: Path, name: str) -> list[str]:
    """Profiles whose `extends` chain goes through `name`; broken ones are not this change's."""
    found = []
    for other in available_profiles(profiles_dir):
        if other == name:
            continue
        try:
            chain = resolve(profiles_dir, other).chain
        except BadInput:
            continue
        if name in chain[1:]:
            found.append(other)
    return found


def _new_errors(
    profiles_dir: Path, scratch: Path, dependent: str, name: str, rename: _Paths, allow_unknown: bool
) -> list[str]:
    try:
        before = set(build_plan(profiles_dir, dependent, allow_unknown=allow_unknown).errors)
    except BadInput as err:
        before = {str(err)}
    try:
        after = [rename(e) for e in build_plan(scratch, dependent, allow_unknown=allow_unknown).errors]
    except BadInput as err:
        after = [rename(str(err))]
    return [f"profile {dependent!r} (extends {name!r}): {e}" for e in after if e not in before]
