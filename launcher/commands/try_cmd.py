"""`launch try --profile NAME`: start, gate, print the report, stop. Never promotes anything."""

from __future__ import annotations

import contextlib
import json
import threading
from functools import partial
from typing import TYPE_CHECKING

import click

from launcher.commands.profile_arg import profile_option
from launcher.host.orphans import deployment_id
from launcher.settings import GlobalOptions

if TYPE_CHECKING:
    from launcher.supervisor.seams import Attempt


@click.command("try")
@profile_option("Profile to try (profiles/NAME.toml).", dest="name", required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the gate report as JSON on stdout.")
@click.option("--allow-unknown", is_flag=True, help="Unknown vLLM flags become warnings (for forks).")
@click.option(
    "--skip-preflight",
    is_flag=True,
    help="Start without the host checks, to see vLLM's own verdict (e.g. its free-memory error). "
    "The GPU lock is still taken; `launch --profile` always runs preflight.",
)
@click.pass_obj
def try_cmd(
    options: GlobalOptions, name: str, as_json: bool, allow_unknown: bool, skip_preflight: bool
) -> None:
    """Start a profile, run its gates, print the report, stop it.

    Exit 0 only if every required gate passed; 1 otherwise. Nothing is promoted: use this to try a
    change before `launch set --apply`.
    """
    from launcher.errors import ExitCode
    from launcher.logfacts.timeline_report import render_table, start_record
    from launcher.profile.candidate import Candidate
    from launcher.profile.plan import build_plan
    from launcher.state.store import StateStore
    from launcher.supervisor.attempt import SignalInbox, StopOnSignal, gate_attempt, launch_attempt
    from launcher.supervisor.history import Event, History
    from launcher.supervisor.lock import ProfileLock
    from launcher.supervisor.progress import Progress, configure_logging
    from launcher.supervisor.start_verdict import early_exit, render_report
    from launcher.supervisor.wiring import host_hooks

    configure_logging()
    plan = build_plan(options.profiles_dir, name, allow_unknown=allow_unknown)
    plan.raise_for_errors()
    candidate = Candidate.from_plan(plan)
    store = StateStore(options.state_dir)
    history = History(store.history_path)
    hooks = host_hooks(options, name)
    progress = Progress()
    progress.engine_log = StateStore(options.state_dir).engine_log(name, try_run=True)
    stop = threading.Event()
    inbox = SignalInbox(stop.set)  # any handled signal ends a try
    with ProfileLock(store, name), contextlib.ExitStack() as on_exit:
        if hooks.preflight is not None and not skip_preflight:
            hooks.preflight(candidate)
        inbox.install()
        on_exit.callback(inbox.restore)
        attempt = launch_attempt(
            candidate,
            store.engine_log(name, try_run=True),
            progress,
            gpu_locks=hooks.gpu_locks,
            deployment=deployment_id(options.state_dir, name),
            loading=hooks.loading,
        )
        on_exit.enter_context(
            StopOnSignal(
                stop, partial(attempt.engine.stop, grace_s=candidate.settings.stop_grace_s), name="try-stop"
            )
        )
        on_exit.callback(_stop, attempt, candidate.settings.stop_grace_s)
        progress.set_phase("gating", candidate=candidate.label)
        report = gate_attempt(attempt, progress, stop.is_set, hooks.gpu_bytes)
        early = None if report.passed else early_exit(attempt, progress.engine_log)
        facts = attempt.facts()
        store.write_last_facts(name, facts)
        timeline = start_record(facts, report.to_json(), attempt.marks)
        history.append(
            Event.TRY,
            profile=name,
            label=candidate.label,
            fingerprint=candidate.fingerprint,
            passed=report.passed,
            gates=report.to_json(),
            timeline=timeline,
        )
    log = store.engine_log(name, try_run=True)
    if as_json:
        click.echo(
            json.dumps(
                {"profile": name, "passed": report.passed, "gates": report.to_json(), "engine_log": str(log)}
                | {"timeline": timeline}
                | ({"engine_start": early.to_json()} if early is not None else {}),
                indent=2,
            )
        )
    else:
        click.echo(render_report(report, f"launch try {name} ({candidate.label})", early))
        if timeline is not None:
            click.echo(render_table(timeline))
        click.echo(f"vLLM's log: {log} (`launch logs --profile {name} --try`)")
        click.echo(_next_step(name, report.passed))
    raise SystemExit(int(ExitCode.OK if report.passed else ExitCode.GATE_FAILED))


def _next_step(name: str, passed: bool) -> str:
    """What to do after a try: it never promotes, so a passing profile is not served yet."""
    if passed:
        return (
            f"next: `launch --profile {name}` serves it (the same start and gates, then promoted and "
            f"watched); under systemd: `launch install-unit --profile {name}`, docs/host-safety.md"
        )
    return f"next: fix the profile (`launch --profile {name} --dry-run` checks it), then try again"


def _stop(attempt: Attempt, grace_s: float) -> None:
    stopped = attempt.stop(grace_s=grace_s)
    if stopped.leftovers:
        click.echo(f"warning: processes left in the engine's group: {list(stopped.leftovers)}", err=True)
