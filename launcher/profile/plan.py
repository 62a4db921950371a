"""A launch plan: a profile resolved, checked and rendered — everything `launch` needs to start vLLM.

This is the one entry point the rest of the launcher uses; it never starts anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.errors import BadInput, ProfileInvalid
from launcher.profile.engine_flags import check_key_env
from launcher.profile.findings import Findings
from launcher.profile.frontdoor_rules import check_frontdoor
from launcher.profile.keys import engine_settings
from launcher.profile.loader import ResolvedProfile, link_note, resolve
from launcher.profile.metavar_choices import check_metavar_choices
from launcher.profile.parser_names import check_parser_names, parser_names
from launcher.profile.render import Rendered, render
from launcher.profile.schema_source import load_installed
from launcher.profile.semantics import check_semantics
from launcher.profile.structure import check_structure
from vllm_flags.schema import VllmSchema, load_snapshot
from vllm_flags.sim_flags import sim_option_specs

SIM_PROGRAM = "vllm-sim"


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    profile: ResolvedProfile
    rendered: Rendered
    schema_origin: str
    warnings: tuple[str, ...]
    errors: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def argv(self) -> tuple[str, ...]:
        return self.rendered.argv

    @property
    def env(self) -> dict[str, str]:
        return self.rendered.env

    @property
    def engine(self) -> dict[str, Any]:
        engine = self.profile.data.get("engine", {})
        return engine if isinstance(engine, dict) else {}

    @property
    def host(self) -> str:
        return engine_settings(self.profile.data).text("host")

    @property
    def port(self) -> int:
        return engine_settings(self.profile.data).integer("port")

    @property
    def served_model_names(self) -> list[str]:
        names = self.engine.get("served_model_name") or self.engine.get("model")
        return [names] if isinstance(names, str) else [str(n) for n in names or []]

    @property
    def args(self) -> dict[str, Any]:
        args = self.profile.data.get("args", {})
        return args if isinstance(args, dict) else {}

    def fingerprint(self) -> str:
        """Hash of what would run (argv + env): equal hashes start the same server."""
        payload = json.dumps({"argv": list(self.argv), "env": self.env}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def raise_for_errors(self, *, needs_key: bool = True) -> None:
        """Refuse a plan that must not start. `needs_key`: what runs here talks to vLLM or starts it,
        so the variable engine.api_key_env names must hold the key now (`install-unit` and
        `preflight` pass False: systemd gives the key to the service, not to the shell)."""
        if self.profile.data.get("abstract") is True:
            raise ProfileInvalid(
                f"profile {self.name!r} is abstract (only to be extended); nothing was started",
                [],
                hint="start a profile that extends it",
            )
        if self.errors:
            raise ProfileInvalid(
                f"profile {self.name!r} has {len(self.errors)} error(s); nothing was started",
                list(self.errors),
                hint=f"see `launch --profile {self.name} --dry-run`",
            )
        unset = self.rendered.unset_secrets(os.environ) if needs_key else []
        if unset:
            raise BadInput(
                f"profile {self.name!r}: engine.api_key_env names ${unset[0]}, which is not set (or is "
                "empty) here, and vLLM would serve without a key; nothing was started",
                hint=f"export {unset[0]}=… (systemd: {unset[0]}=… in /etc/vllm-gate/{self.name}.env)",
            )


def build_plan(
    profiles_dir: Path, name: str, *, allow_unknown: bool = False, top_file: Path | None = None
) -> LaunchPlan:
    """Resolve, check and render profile `name` (syntax errors and a missing profile raise)."""
    profile = resolve(profiles_dir, name, top_file=top_file)
    findings = Findings()
    for path in profile.files:
        note = link_note(profiles_dir, path)
        if note is not None:
            findings.warn(note)
    check_structure(profile, findings)
    engine = engine_settings(profile.data)
    schema_choice = engine.text("schema")
    command = engine.table.get("command")
    schema, installed = _schema_for(schema_choice, command)
    lenient = allow_unknown or schema_choice == "none"
    rendered = render(profile, schema, findings, lenient=lenient)
    check_semantics(profile, findings)
    check_frontdoor(profile, findings)
    check_key_env(profile, findings)
    _check_env_names(rendered, schema, findings)
    if schema_choice != "none":
        sim = _program(command) == SIM_PROGRAM
        _check_names(profile, schema, findings, sim=sim, installed=installed, allow_unknown=allow_unknown)
    return LaunchPlan(
        profile=profile,
        rendered=rendered,
        schema_origin=schema.origin,
        warnings=tuple(findings.warnings),
        errors=tuple(findings.errors),
    )


def _check_names(
    profile: ResolvedProfile,
    schema: VllmSchema,
    findings: Findings,
    *,
    sim: bool,
    installed: bool,
    allow_unknown: bool,
) -> None:
    """Names the engine would refuse only after its imports: parsers, and values listed in a metavar.
    Where the names are certain (the installed vLLM's, the simulator's release) they are errors."""
    args = profile.data.get("args", {})
    names = parser_names(schema, args if isinstance(args, dict) else {}, sim=sim, installed=installed)
    if names is not None:
        check_parser_names(profile, names, findings)
    certain = names is not None and names.certain and not allow_unknown
    whose = names.whose if names is not None else f"vLLM {schema.vllm_version}"
    check_metavar_choices(profile, schema, findings, certain=certain, whose=whose)


def _program(command: Any) -> str:
    return (
        Path(command[0]).name if isinstance(command, list) and command and isinstance(command[0], str) else ""
    )


def _schema_for(choice: str, command: Any) -> tuple[VllmSchema, bool]:
    """The schema, and whether it is the installed vLLM's own."""
    installed = None if choice in ("snapshot", "none") else load_installed()
    schema = installed if installed is not None else load_snapshot()
    if _program(command) == SIM_PROGRAM:
        extra = {spec.option: spec for spec in sim_option_specs()}
        schema = dataclasses.replace(
            schema, options={**schema.options, **extra}, origin=schema.origin + " + vllm-sim flags"
        )
    return schema, installed is not None


def _check_env_names(rendered: Rendered, schema: VllmSchema, findings: Findings) -> None:
    """Unknown VLLM_* names are warnings: vLLM itself only warns about them."""
    from launcher.profile.findings import did_you_mean

    for name in rendered.env:
        if name.startswith("VLLM_SIM_"):
            continue
        if name.startswith("VLLM_") and schema.env_vars and name not in schema.env_vars:
            findings.warn(
                f"env.{name}: vLLM {schema.vllm_version} declares no such variable (a fork's own flag?)"
                f"{did_you_mean(name, schema.env_vars)}"
            )
