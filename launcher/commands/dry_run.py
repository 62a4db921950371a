"""`launch --profile NAME --dry-run`: what would run, what changed, what is wrong — starts nothing."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import click

from launcher.commands.trial_plan import trial_lines, trial_plan
from launcher.commands.warm_plan import warm_lines, warm_plan
from launcher.errors import BadInput, ExitCode
from launcher.frontdoor.door import door_of, has_frontdoor
from launcher.frontdoor.first_target import first_target
from launcher.profile.diff import Change, diff_launches
from launcher.profile.keys import SupervisorSettings
from launcher.profile.kvpool import KvPool, kv_pool
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.redact import redact_argv, redact_env
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore
from launcher.supervisor.sleep import park_costs


def run_dry_run(
    options: GlobalOptions, name: str, *, explain: bool, as_json: bool, allow_unknown: bool
) -> int:
    plan = build_plan(options.profiles_dir, name, allow_unknown=allow_unknown)
    store = StateStore(options.state_dir)
    baseline_label, changes = _baseline_diff(plan, options.profiles_dir, store)
    facts = store.last_facts(name) if options.state_dir.exists() else None
    pool = kv_pool(plan.args, facts)
    door = _frontdoor(plan, store)
    # A plan with errors may hold values of the wrong type: they are reported, never read as settings.
    ok = not plan.errors
    park = park_costs(SupervisorSettings.read(_table(plan.profile.data, "supervisor")), facts) if ok else None
    trial = trial_plan(plan, options, store) if ok else None
    warm = warm_plan(plan, facts, store) if ok else None
    if as_json:
        shown = {**_as_json(plan, baseline_label, changes, pool), "frontdoor": door, "park": park}
        click.echo(json.dumps({**shown, "trial": trial, "warm": warm}, indent=2, ensure_ascii=False))
    else:
        _print_human(plan, explain, baseline_label, changes, pool, door, park, trial, warm)
    return int(ExitCode.BAD_INPUT) if plan.errors or (door and "error" in door) else int(ExitCode.OK)


def _frontdoor(plan: LaunchPlan, store: StateStore) -> dict[str, Any] | None:
    """The profile's front door (`launch frontdoor`): its URL and where it would point now."""
    if plan.errors or not has_frontdoor(plan.profile.data):
        return None
    try:
        door = door_of(plan.name, plan.profile.data, store)
    except BadInput as err:
        return {"error": f"{err.message} ({err.hint})" if err.hint else err.message}
    dial, why = first_target(door, store)
    return {
        "url": door.url,
        "points_at": dial,
        "why": why,
        "engines": list(door.engine_dials),
        "admin": str(door.admin),
        "hold_s": door.settings.hold_s,
        "retry_after_s": door.settings.retry_after_s,
        "drain_timeout_s": door.settings.drain_timeout_s,
    }


def _table(data: dict[str, Any], name: str) -> dict[str, Any] | None:
    table = data.get(name)
    return table if isinstance(table, dict) else None


def _park_lines(park: dict[str, Any] | None) -> list[str]:
    """What `park = "sleep"` costs, so an operator sees when `stop` is cheaper (vllm-facts.md §12)."""
    if park is None:
        return []
    first = (
        f"about {park['first_sleep_s']:g} s for the {park['weights_gib']:.1f} GiB of weights it loaded"
        if park["first_sleep_s"] is not None
        else "unknown until a start has logged its weights"
    )
    start = f"{park['last_start_s']:.0f} s" if park["last_start_s"] is not None else "unknown yet"
    return [
        f"park: sleep beside a change. An engine's first sleep pins host buffers for its weights: {first};",
        f"  later sleeps ~{park['later_sleep_s']:g} s, a wake ~{park['wake_s']:g} s. A rejected change then "
        f'costs its candidate\'s start and a wake; with park = "stop" its start and a cold start of '
        f"last-good (the last start took {start}).",
    ]


def _frontdoor_lines(name: str, door: dict[str, Any] | None) -> list[str]:
    if door is None:
        return []
    if "error" in door:
        return [click.style("error: ", fg="red") + f"front door: {door['error']}", ""]
    return [
        f"front door: {door['url']} → {door['points_at']} ({door['why']})",
        f"  engines {', '.join(door['engines'])}; admin API {door['admin']}; a request waits up to "
        f"{door['hold_s']:g} s, then 503 (Retry-After: {door['retry_after_s']})",
        f"  run it: launch frontdoor --profile {name} (systemd: vllm-gate-frontdoor@{name})",
        "",
    ]


def _baseline_diff(
    plan: LaunchPlan, profiles_dir: Path, store: StateStore
) -> tuple[str | None, list[Change]]:
    """Diff against the last promoted launch; else against the profile's newest `.bak_<tag>`."""
    last_good = store.last_good(plan.name) if store.root.exists() else None
    if last_good is not None:
        when, fingerprint = last_good.get("promoted_at", "unknown time"), last_good.get("fingerprint", "?")
        label = f"last promoted ({when}, {fingerprint})"
        return label, diff_launches(last_good.get("argv", []), last_good.get("env", {}), plan.argv, plan.env)
    baks = sorted(profiles_dir.glob(f"{plan.name}.toml.bak_*"), key=lambda p: p.stat().st_mtime)
    if not baks:
        return None, []
    newest = baks[-1]
    try:
        old = build_plan(profiles_dir, plan.name, allow_unknown=True, top_file=newest)
    except Exception as err:  # a broken .bak must not hide the dry run itself
        return f"{newest.name} (unreadable: {err})", []
    return newest.name, diff_launches(old.argv, old.env, plan.argv, plan.env)


def _as_json(
    plan: LaunchPlan, baseline: str | None, changes: list[Change], pool: KvPool | None
) -> dict[str, Any]:
    return {
        "profile": plan.name,
        "chain": list(plan.profile.chain),
        "files": [str(f) for f in plan.profile.files],
        "argv": redact_argv(plan.argv),
        "command": shlex.join(redact_argv(plan.argv)),
        "env": redact_env(plan.env),
        "secret_env": {k: f"${v}" for k, v in plan.rendered.secret_env.items()},
        "provenance": {k: str(v) for k, v in sorted(plan.profile.provenance.items())},
        "schema": plan.schema_origin,
        "fingerprint": plan.fingerprint(),
        "diff": {"against": baseline, "changes": [c.to_json() for c in changes]},
        "kv_pool": pool.as_json() if pool else None,
        "warnings": _warnings(plan, pool),
        "errors": list(plan.errors),
    }


def _print_human(
    plan: LaunchPlan,
    explain: bool,
    baseline: str | None,
    changes: list[Change],
    pool: KvPool | None,
    door: dict[str, Any] | None,
    park: dict[str, Any] | None = None,
    trial: dict[str, Any] | None = None,
    warm: dict[str, Any] | None = None,
) -> None:
    echo = click.echo
    chain = " ← ".join(plan.profile.chain)
    echo(f"profile   {plan.name}   (chain: {chain})")
    echo(f"schema    {plan.schema_origin}")
    echo("")
    echo("command:")
    echo(f"  {shlex.join(redact_argv(plan.argv))}")  # a literal key is refused below, never shown
    echo("environment added:")
    for line in _environment_lines(plan):
        echo(f"  {line}")
    if explain:
        echo("")
        echo("where each value comes from:")
        for line in _provenance_lines(plan):
            echo(f"  {line}")
    echo("")
    plans = [*_frontdoor_lines(plan.name, door), *trial_lines(trial), *_park_lines(park), *warm_lines(warm)]
    for line in plans:
        echo(line)
    for line in _change_lines(baseline, changes):
        echo(line)
    if pool:
        echo(pool.line())
    for warning in _warnings(plan, pool):
        echo(click.style("warning: ", fg="yellow") + warning)
    for error in plan.errors:
        echo(click.style("error: ", fg="red") + error)
    echo("")
    verdict = "invalid: fix the errors above" if plan.errors else "valid"
    echo(f"dry run: {verdict}; nothing was started")


def _environment_lines(plan: LaunchPlan) -> list[str]:
    """What the launch adds to vLLM's environment; secrets by the variable they come from."""
    lines = [f"{name}={shlex.quote(value)}" for name, value in redact_env(plan.env).items()]
    lines += [f"{name}=<from ${source}, not shown>" for name, source in plan.rendered.secret_env.items()]
    return lines or ["(none)"]


def _provenance_lines(plan: LaunchPlan) -> list[str]:
    """Each setting and where its value came from (file and key, a default, the schema)."""
    width = max((len(k) for k in plan.profile.provenance), default=0)
    return [f"{key:<{width}}  {origin}" for key, origin in sorted(plan.profile.provenance.items())]


def _warnings(plan: LaunchPlan, pool: KvPool | None) -> list[str]:
    return [*plan.warnings, *_key_warnings(plan), *([pool.warning] if pool and pool.warning else [])]


def _key_warnings(plan: LaunchPlan) -> list[str]:
    """The key's variable unset here: a start from this shell is refused (exit 2), yet systemd gives
    the service its own environment, so the dry run only says it (issue 42: it said nothing)."""
    return [
        f"engine.api_key_env names ${name}, which is not set (or is empty) here: a start from this "
        f"environment is refused, exit 2 (systemd gives the unit {name} from /etc/vllm-gate/{plan.name}.env)"
        for name in plan.rendered.unset_secrets(os.environ)
    ]


def _change_lines(baseline: str | None, changes: list[Change]) -> list[str]:
    """What differs from the launch compared with, or that there is nothing to compare with."""
    if baseline is None:
        return ["changes: nothing to compare with (no promoted launch recorded, no .bak_<tag> file)"]
    if not changes:
        return [f"changes against {baseline}: none"]
    return [f"changes against {baseline}:", *(f"  {line}" for change in changes for line in change.lines())]
