"""`launch preflight --profile NAME`: every host check, ok / refused / skipped with its reason.

Starts nothing. With `--reap-orphans` it ends the vLLM orphans that block this profile first: this
deployment's, and any holding its GPUs (with `--force`, every process holding its GPUs; with
`--reap-foreign PID|DEPLOYMENT`, another deployment's orphans the operator names). Exit 4 when a
check refuses, as `launch --profile` would.
"""

from __future__ import annotations

import json

import click

from launcher.commands.profile_arg import profile_option
from launcher.host.preflight import check_host
from launcher.host.request import HostRequest
from launcher.profile.plan import build_plan
from launcher.settings import GlobalOptions


@click.command("preflight")
@profile_option("Profile whose host checks to run.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--reap-orphans", is_flag=True, help="End vLLM orphans first: SIGTERM, grace, SIGKILL.")
@click.option("--force", is_flag=True, help="With --reap-orphans: also end every other process on the GPUs.")
@click.option(
    "--reap-foreign",
    "named",
    metavar="PID|DEPLOYMENT",
    multiple=True,
    help="With --reap-orphans: also end this orphan of another deployment (a pid, or a deployment "
    "or profile name as preflight lists it). Repeatable.",
)
@click.option("--allow-unknown", is_flag=True, help="Unknown vLLM flags become warnings (for forks).")
@click.pass_context
def preflight(
    ctx: click.Context,
    profile: str | None,
    as_json: bool,
    reap_orphans: bool,
    force: bool,
    named: tuple[str, ...],
    allow_unknown: bool,
) -> None:
    """Check the host before a start: GPU memory, vLLM orphans, one model per GPU, RAM, swap, port.

    \b
      launch preflight --profile prod                  report; exit 4 if a check refuses
      launch preflight --profile prod --reap-orphans   end this deployment's orphans first, then check
      launch preflight --profile prod --reap-orphans --reap-foreign 4242
    """
    options: GlobalOptions = ctx.obj
    name = profile or (ctx.parent.params.get("profile") if ctx.parent else None)
    if not name:
        raise click.UsageError("which profile? `launch preflight --profile NAME`")
    plan = build_plan(options.profiles_dir, name, allow_unknown=allow_unknown)
    plan.raise_for_errors(needs_key=False)
    report = check_host(HostRequest.from_plan(plan), options, reap=reap_orphans, force=force, named=named)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(report.render_text())
    report.raise_if_refused()
