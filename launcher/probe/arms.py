"""Arms: `NAME:KEY=VALUE` on the command line → the production profile with those keys changed.

The edit is the one `launch set` makes (launcher/profile/edit.py: a bare key is `[args]`, then
`env.X`, `engine.X`, `gates.N.K`), applied to the text of the profile's own file and rendered from a
scratch copy, so the operator's file is never written. Arm 0 is production itself.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import BadInput, ProfileInvalid
from launcher.profile.diff import Change, diff_launches
from launcher.profile.edit import apply_assignments, match_spelling, parse_assignment
from launcher.profile.loader import PROFILE_SUFFIX, profile_path
from launcher.profile.plan import LaunchPlan, build_plan

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
ARM_HINT = "write each arm as NAME:KEY=VALUE, e.g. --arm util030:gpu_memory_utilization=0.30"


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """What the operator asked for: a name and its `key=value`s (repeat `--arm NAME:...` to add keys)."""

    name: str
    assignments: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Arm:
    index: int  # 0 is production
    name: str
    assignments: tuple[str, ...]
    plan: LaunchPlan
    changes: tuple[Change, ...]  # argv/env differences from production

    @property
    def is_production(self) -> bool:
        return self.index == 0

    def describe_keys(self) -> str:
        return " ".join(self.assignments) if self.assignments else "production as it serves"


def parse_arm_specs(given: Sequence[str], production: str) -> list[ArmSpec]:
    """`util030:gpu_memory_utilization=0.30`; the same name twice adds keys to one arm."""
    order: list[str] = []
    keys: dict[str, list[str]] = {}
    for text in given:
        name, sep, assignment = text.partition(":")
        name = name.strip()
        if not sep or not assignment.strip():
            raise BadInput(f"--arm {text!r} has no KEY=VALUE after a name and ':'", hint=ARM_HINT)
        if not NAME_RE.match(name):
            raise BadInput(
                f"--arm {text!r}: {name!r} is not an arm name (letters, digits, '_', '.', '-'; 40 at most)",
                hint=ARM_HINT,
            )
        if name == production:
            raise BadInput(
                f"--arm {text!r}: {name!r} is arm 0, production as it serves",
                hint="give the changed arm another name",
            )
        if name not in keys:
            order.append(name)
            keys[name] = []
        keys[name].append(assignment.strip())
    return [ArmSpec(name, tuple(keys[name])) for name in order]


def build_arms(
    profiles_dir: Path, profile: str, specs: Sequence[ArmSpec], *, allow_unknown: bool = False
) -> list[Arm]:
    """Arm 0 (the profile as it renders now) and one arm per spec; any bad arm raises, nothing runs."""
    production = build_plan(profiles_dir, profile, allow_unknown=allow_unknown)
    production.raise_for_errors()
    arms = [Arm(0, profile, (), production, ())]
    for index, spec in enumerate(specs, start=1):
        plan = arm_plan(profiles_dir, profile, spec, production, allow_unknown=allow_unknown)
        changes = tuple(diff_launches(production.argv, production.env, plan.argv, plan.env))
        if not changes:
            raise BadInput(
                f"arm {spec.name!r} ({' '.join(spec.assignments)}) starts exactly what production starts "
                "(same argv and env): there is nothing to measure",
                hint="an arm must change a vLLM flag ([args]), an env.X or an engine.X key",
            )
        arms.append(Arm(index, spec.name, spec.assignments, plan, changes))
    return arms


def arm_plan(
    profiles_dir: Path, profile: str, spec: ArmSpec, production: LaunchPlan, *, allow_unknown: bool = False
) -> LaunchPlan:
    """The production profile's own file with the arm's keys set, rendered from a scratch file."""
    path = profile_path(profiles_dir, profile)
    items = match_spelling([parse_assignment(given) for given in spec.assignments], list(production.args))
    where = f"{path} with arm {spec.name!r}"
    edited = apply_assignments(path.read_bytes().decode("utf-8"), items, where=where)
    with tempfile.TemporaryDirectory(prefix="vllm-gate-arm-") as tmp:
        scratch = Path(tmp) / f"{profile}{PROFILE_SUFFIX}"
        scratch.write_text(edited, encoding="utf-8")
        try:
            plan = build_plan(profiles_dir, profile, allow_unknown=allow_unknown, top_file=scratch)
        except BadInput as err:
            raise BadInput(err.message.replace(str(scratch), where), hint=err.hint) from err
        errors = [e.replace(str(scratch), where) for e in plan.errors]
    if errors:
        raise ProfileInvalid(
            f"arm {spec.name!r} ({' '.join(spec.assignments)}) does not render: {len(errors)} error(s); "
            "nothing was started",
            errors,
            hint=f"check the change with `launch set {profile} {' '.join(spec.assignments)} --dry-run`",
        )
    return plan
