"""`launch logs --profile NAME` (or the older `launch logs NAME`): vLLM's own log and the launcher's
events for a profile, apart or interleaved."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

import click

from launcher.commands.profile_arg import profile_option
from launcher.completion import profile_names
from launcher.errors import BadInput
from launcher.logview import (
    LogLine,
    Stamper,
    Tail,
    history_line,
    interleave,
    parse_since,
    read_engine,
    read_history,
    render,
    render_json,
    rotated_files,
    since,
)
from launcher.profile.loader import NAME_RE
from launcher.settings import GlobalOptions
from launcher.state.store import StateStore

from .profile_arg import profile_of

FOLLOW_POLL_S = 0.25


@click.command("logs")
@click.argument("positional", metavar="[NAME]", required=False, shell_complete=profile_names)
@profile_option("The profile (or give it first, as before).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option(
    "--since", "since_text", metavar="T", help="From T on: 10m, 2h, 1d, or a time (2026-12-01T06:00)."
)
@click.option("--engine", "only", flag_value="engine", help="Only vLLM's own log, as it wrote it.")
@click.option("--launcher", "only", flag_value="launch", help="Only the launcher's events (the history).")
@click.option(
    "--try", "from_try", is_flag=True, help="The last `launch try`'s vLLM log instead of the server's."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON Lines: one {at, source, text, record} object a line (docs/logs.md); -f goes on so.",
)
@click.pass_obj
def logs_cmd(
    options: GlobalOptions,
    positional: str | None,
    profile: str | None,
    follow: bool,
    since_text: str | None,
    only: str | None,
    from_try: bool,
    as_json: bool,
) -> None:
    """vLLM's own log (STATE/profiles/NAME/logs/engine.log, rotated) and the launcher's events
    (STATE/history.jsonl), interleaved by time; each line says which it is.

    \b
      launch logs --profile prod --since 10m    the last ten minutes of both
      launch logs --profile prod --engine -f    follow vLLM's output, as `tail -f` would
      launch logs prod                          the older form, still accepted
      launch logs --profile prod --json | jq    one JSON object a line
    """
    name = profile_of("logs", profile, positional)
    if not NAME_RE.match(name):
        raise BadInput(f"invalid profile name {name!r}", hint="use letters, digits, '-', '_' and '.'")
    store = StateStore(options.state_dir)
    log = store.engine_log(name, try_run=from_try)
    if not log.is_file() and not store.profile_dir(name).is_dir():
        raise BadInput(
            f"nothing has run for profile {name!r} in state dir {store.root}: no {log}",
            hint="`launch status` lists the profiles that ran; --state-dir picks another state dir",
        )
    start = parse_since(since_text, datetime.now(UTC)) if since_text else None
    click.echo(f"# vLLM log: {log}" + ("" if log.is_file() else " (not written yet)"), err=True)
    engine_tail, history_tail, stamper = Tail(log), Tail(store.history_path), Stamper()
    streams = []
    if only != "launch":
        streams.append(read_engine(rotated_files(log), engine_tail, stamper))
    if only != "engine":
        streams.append(read_history(history_tail, name))
    show = render_json if as_json else partial(render, tagged=only is None)
    for line in since(interleave(*streams), start):
        click.echo(show(line))
    if follow:
        _follow(
            engine_tail if only != "launch" else None,
            history_tail if only != "engine" else None,
            stamper,
            name,
            show,
        )


def _follow(
    engine: Tail | None, history: Tail | None, stamper: Stamper, name: str, show: Callable[[LogLine], str]
) -> None:
    """Print what the two files gain, a batch every FOLLOW_POLL_S, merged by time; Ctrl-C ends it."""
    idle = threading.Event()  # never set: an interruptible wait
    try:
        while True:
            now = datetime.now(UTC)
            fresh: list[LogLine] = []
            for text in engine.read_new() if engine else []:
                fresh += stamper.feed(text, now)
            fresh += stamper.flush()  # a log without vLLM stamps must not wait for one
            batch = [x for raw in (history.read_new() if history else []) if (x := history_line(raw, name))]
            for line in interleave(fresh, batch):
                click.echo(show(line))
            idle.wait(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        return
