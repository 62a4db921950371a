"""`launch --profile NAME`: the systemd ExecStart form (the supervisor lands with the gate chain)."""

from __future__ import annotations

from launcher.errors import BadInput
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions


def run_serve(options: GlobalOptions, name: str, *, allow_unknown: bool) -> int:
    plan = build_plan(options.profiles_dir, name, allow_unknown=allow_unknown)
    plan.raise_for_errors()
    raise BadInput("starting vLLM is not built yet", hint=f"use `launch --profile {name} --dry-run`")
