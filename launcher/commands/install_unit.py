"""`launch install-unit`: write the systemd template unit and, for a profile, its per-host drop-in.

Runs no systemctl: it prints the commands to run next, so the operator decides when to start.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from launcher.atomicfile import write_atomic
from launcher.errors import BadInput
from launcher.host.unit import UNIT_NAME, dropin_path, launch_executable, render_dropin, render_unit
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions

DEFAULT_UNIT_DIR = Path("/etc/systemd/system")
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
@click.option("--profile", "profile", metavar="NAME", help="Also write the drop-in of vllm-gate@NAME.")
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
    help="Run vLLM as this user (User= in the drop-in) instead of root; needs --profile.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be written; write nothing.")
@click.pass_context
def install_unit(
    ctx: click.Context, profile: str | None, unit_dir: Path, user: str | None, dry_run: bool
) -> None:
    """Install vllm-gate@.service (instance = profile name) for systemd.

    \b
      sudo launch install-unit --profile prod     then: systemctl daemon-reload
                                                        systemctl enable --now vllm-gate@prod
    """
    options: GlobalOptions = ctx.obj
    name = profile or (ctx.parent.params.get("profile") if ctx.parent else None)
    if user and not name:
        raise BadInput("--user goes in a profile's drop-in", hint="add --profile NAME")
    files = {unit_dir / UNIT_NAME: render_unit(str(launch_executable()))}
    if name:
        plan = build_plan(options.profiles_dir, name)
        plan.raise_for_errors()
        api_key_env = plan.engine.get("api_key_env")
        dropin = render_dropin(
            name, options.profiles_dir, options.state_dir, str(api_key_env) if api_key_env else None, user
        )
        files[dropin_path(unit_dir, name)] = dropin
    if dry_run:
        for path, text in files.items():
            click.echo(f"--- would write {path}\n{text}")
        return
    for path, text in files.items():
        try:
            write_atomic(path, text, mode=0o644)
        except OSError as err:
            raise BadInput(
                f"cannot write {path}: {err.strerror or err}", hint="run as root, or give --unit-dir"
            ) from err
        click.echo(f"wrote {path}")
    instance = f"vllm-gate@{name}" if name else "vllm-gate@PROFILE"
    click.echo(f"next: systemctl daemon-reload && systemctl enable --now {instance}")
