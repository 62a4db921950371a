"""`launch install-unit`: write the systemd template unit and, for a profile, its per-host drop-in.

Runs no systemctl: it prints the commands to run next, so the operator decides when to start.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from launcher.atomicfile import write_atomic
from launcher.commands.profile_arg import profile_option
from launcher.errors import BadInput
from launcher.frontdoor.door import door_of, has_frontdoor
from launcher.host.frontdoor_unit import (
    FRONTDOOR_UNIT_NAME,
    frontdoor_dropin_path,
    frontdoor_ip_lines,
    render_frontdoor_dropin,
    render_frontdoor_unit,
)
from launcher.host.service_user import Needed, launch_needs, service_user_notes
from launcher.host.unit import (
    DEFAULT_USER,
    UNIT_NAME,
    dropin_path,
    launch_executable,
    render_dropin,
    render_unit,
)
from launcher.host.unit_network import client_networks, ip_filter_lines
from launcher.profile.plan import LaunchPlan, build_plan
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore

DEFAULT_UNIT_DIR = Path("/etc/systemd/system")
STATE_DIRECTORY = Path("/var/lib/vllm-gate")  # the unit's StateDirectory=: systemd chowns it to User=
# systemd's portable user names (and plain uids); anything else would be misread in the unit file
USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,31}|[0-9]{1,10}")


def _user_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not USER_NAME.fullmatch(value):
        raise BadInput(
            f"--user {value!r} is not a user name systemd accepts",
            hint="letters, digits, '_' and '-', starting with a letter or '_', at most 32; or a uid",
        )
    return value


@click.command("install-unit")
@profile_option("Also write the drop-in of vllm-gate@NAME.")
@click.option(
    "--unit-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_UNIT_DIR,
    show_default=True,
    help="Where unit files go.",
)
@click.option(
    "--user",
    metavar="NAME",
    callback=_user_name,
    help=f"Run vLLM as this user (User= in the drop-in), not the unit's {DEFAULT_USER}; needs --profile.",
)
@click.option(
    "--ip-allow",
    "ip_allow",
    metavar="NET",
    multiple=True,
    help="The clients' networks (10.0.0.0/8, an address): with them the drop-in denies every other IP.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be written; write nothing.")
@click.pass_context
def install_unit(
    ctx: click.Context,
    profile: str | None,
    unit_dir: Path,
    user: str | None,
    ip_allow: tuple[str, ...],
    dry_run: bool,
) -> None:
    """Install vllm-gate@.service (instance = profile name) for systemd.

    \b
    Also vllm-gate-frontdoor@.service, the front door (`launch frontdoor`), and its drop-in when the
    profile has a [frontdoor] (docs/frontdoor.md).
    \b
      sudo launch install-unit --profile prod     then: systemctl daemon-reload
                                                        systemctl enable --now vllm-gate@prod
    """
    options: GlobalOptions = ctx.obj
    name = _profile_named(ctx, profile, user, ip_allow)
    files, needed = _unit_files(options, unit_dir, name, user, client_networks(ip_allow))
    notes = service_user_notes(user or DEFAULT_USER, needed)
    if dry_run:
        for path, text in files.items():
            click.echo(f"--- would write {path}\n{text}")
        _echo(notes)
        return
    _write(files)
    _echo(notes)
    instance = f"vllm-gate@{name}" if name else "vllm-gate@PROFILE"
    if name and frontdoor_dropin_path(unit_dir, name) in files:
        instance += f" vllm-gate-frontdoor@{name}"
    click.echo(f"next: systemctl daemon-reload && systemctl enable --now {instance}")


def _profile_named(
    ctx: click.Context, profile: str | None, user: str | None, ip_allow: tuple[str, ...]
) -> str | None:
    """The profile given here or before the command; `--user` and `--ip-allow` need one (its drop-in)."""
    name = profile or (ctx.parent.params.get("profile") if ctx.parent else None)
    if (user or ip_allow) and not name:
        given = "--user" if user else "--ip-allow"
        raise BadInput(f"{given} goes in a profile's drop-in", hint="add --profile NAME")
    return name


def _unit_files(
    options: GlobalOptions, unit_dir: Path, name: str | None, user: str | None, clients: list[str]
) -> tuple[dict[Path, str], list[Needed]]:
    """The unit (and the profile's drop-in) by path, and what the service user must reach."""
    launch_path = launch_executable()
    files = {
        unit_dir / UNIT_NAME: render_unit(str(launch_path)),
        unit_dir / FRONTDOOR_UNIT_NAME: render_frontdoor_unit(str(launch_path)),
    }
    needed = launch_needs(launch_path)
    if name:
        plan = build_plan(options.profiles_dir, name)
        plan.raise_for_errors(needs_key=False)
        api_key_env = plan.engine.get("api_key_env")
        ip_lines = ip_filter_lines(plan.host, plan.engine, plan.args, plan.env, clients)
        files[dropin_path(unit_dir, name)] = render_dropin(
            name,
            options.profiles_dir,
            options.state_dir,
            str(api_key_env) if api_key_env else None,
            user,
            ip_lines,
        )
        files.update(_frontdoor_dropin(plan, options, unit_dir, user, clients))
        needed += _needed_by(plan, options)
    return files, needed


def _frontdoor_dropin(
    plan: LaunchPlan, options: GlobalOptions, unit_dir: Path, user: str | None, clients: list[str]
) -> dict[Path, str]:
    """The front door's drop-in, for a profile that has one: the same dirs and user as the engine's."""
    if not has_frontdoor(plan.profile.data):
        return {}
    door = door_of(plan.name, plan.profile.data, StateStore(options.state_dir))
    ip_lines = frontdoor_ip_lines(door.settings.host, door.engine_hosts, clients)
    text = render_frontdoor_dropin(plan.name, options.profiles_dir, options.state_dir, user, ip_lines)
    return {frontdoor_dropin_path(unit_dir, plan.name): text}


def _echo(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


def _needed_by(plan: LaunchPlan, options: GlobalOptions) -> list[Needed]:
    """What the drop-in's profile makes the service user read (and write: a state dir of its own)."""
    needed = [Needed("the profiles dir", options.profiles_dir, "rx")]
    model = Path(str(plan.engine.get("model") or ""))
    if model.is_absolute():
        needed.append(Needed("engine.model", model, "r"))
    if options.state_dir.absolute() != STATE_DIRECTORY:
        needed.append(Needed("the state dir", options.state_dir, "rwx"))
    return needed


def _write(files: dict[Path, str]) -> None:
    for path, text in files.items():
        try:
            write_atomic(path, text, mode=0o644)
        except OSError as err:
            raise BadInput(
                f"cannot write {path}: {err.strerror or err}", hint="run as root, or give --unit-dir"
            ) from err
        click.echo(f"wrote {path}")
