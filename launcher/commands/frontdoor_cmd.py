"""`launch frontdoor --profile NAME`: the profile's front door, in the foreground, as its own process.

It renders Caddy's config into the state dir, points the door at what serves now, and execs
`caddy run`: the process that systemd (`vllm-gate-frontdoor@NAME`) or the operator started becomes
Caddy itself, no launcher stays in between, and no launcher's restart, crash or SIGKILL reaches it.
"""

from __future__ import annotations

import os

import click

from launcher.atomicfile import write_atomic
from launcher.commands.profile_arg import profile_of, profile_option
from launcher.errors import BadInput
from launcher.frontdoor.admin import FrontdoorAdmin, FrontdoorError
from launcher.frontdoor.binary import caddy_executable
from launcher.frontdoor.config import FORWARDED_PATHS, config_text
from launcher.frontdoor.door import Door, load_door
from launcher.frontdoor.door_lock import take_door_lock
from launcher.frontdoor.first_target import first_target
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore


@click.command("frontdoor")
@profile_option("The profile whose front door to run.")
@click.option(
    "--dry-run", is_flag=True, help="Print Caddy's config and where the door would point; start nothing."
)
@click.pass_context
def frontdoor_cmd(ctx: click.Context, profile: str | None, dry_run: bool) -> None:
    """Run the profile's front door: one stable port for clients ([frontdoor] port), forwarding to
    the engine that serves now, on engine.port or supervisor.park_port.

    \b
    Caddy runs in the foreground, in this process (exec): stop it with SIGTERM (streams in flight
    get drain_timeout_s to finish). Requests wait at the door up to hold_s while no engine serves,
    then get 503 with Retry-After. Only /v1/*, /health, /metrics, /version, /tokenize and
    /detokenize are forwarded. docs/frontdoor.md.
    \b
    No --json: --dry-run's stdout is Caddy's JSON config (the summary goes to stderr); where the
    door points, as JSON: `launch --profile NAME --dry-run --json` (its "frontdoor").
    \b
      launch frontdoor --profile prod --dry-run    the config, and where it points; starts nothing
      launch frontdoor --profile prod              run it (systemd: vllm-gate-frontdoor@prod)
      sudo launch install-unit --profile prod      writes vllm-gate-frontdoor@.service too
    """
    options: GlobalOptions = ctx.obj
    name = profile_of("frontdoor", profile, None)
    store = StateStore(options.state_dir)
    door = load_door(options.profiles_dir, name, store)
    dial, why = first_target(door, store)
    if dry_run:
        click.echo(config_text(door), nl=False)
        click.echo(_summary(door, dial, why) + "\ndry run: nothing was started", err=True)
        return
    caddy = caddy_executable()
    take_door_lock(door)  # kept open across the exec: Caddy holds it
    _prepare(door, dial)
    click.echo(_summary(door, dial, why) + f"\nexec {caddy} run --config {door.config_path}", err=True)
    env = {**os.environ, "XDG_DATA_HOME": str(door.home), "XDG_CONFIG_HOME": str(door.home)}
    os.execve(caddy, [str(caddy), "run", "--config", str(door.config_path)], env)


def _prepare(door: Door, dial: str) -> None:
    """The config and the first target, written before Caddy starts; Caddy's own files (XDG dirs:
    its instance id, its storage) go under the door's directory, not the service user's home."""
    try:
        write_atomic(door.config_path, config_text(door), mode=0o600)
        FrontdoorAdmin(door).point_at(dial)
    except (OSError, FrontdoorError) as err:
        raise BadInput(
            f"cannot write the front door's files in {door.home}: {err}; nothing was started",
            hint="check that the state dir is writable (--state-dir, $VLLM_GATE_STATE)",
        ) from err


def _summary(door: Door, dial: str, why: str) -> str:
    return (
        f"front door of {door.profile}: clients {door.url} → {dial} ({why})\n"
        f"  holds a request up to {door.settings.hold_s:g} s, then 503 Retry-After: "
        f"{door.settings.retry_after_s}; forwards {' '.join(FORWARDED_PATHS)}\n"
        f"  admin API {door.admin}; engines {', '.join(door.engine_dials)}"
    )
