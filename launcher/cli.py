"""The `launch` command line: one click group, subcommands registered from `launcher/commands/`.

Errors meant for the operator (`GateError`) are turned into one paragraph and an exit code here,
and only here; anything else is a bug: its traceback goes to a bug report file and `launch` exits 70.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO, cast

import click

from launcher import __version__
from launcher.completion import profile_names
from launcher.errors import BadInput, ExitCode, GateError, OutputLost
from launcher.settings import GlobalOptions
from launcher.terminal import (
    AnswerStream,
    DiagnosticStream,
    colour_allowed,
    is_journal,
    reopen_closed_standard_streams,
)

EXIT_CODES_HELP = """\b
Exit codes (docs/exit-codes.md):
  0  ok
  1  a gate failed (bench: nothing was measured)
  2  bad input (also an option the subcommand does not take); nothing was changed
  3  rolled back: the candidate was rejected, last-good is served
  4  refused before starting (preflight or the restart guard)
  5  the engine died after promotion (any of its processes)
  70  a launcher bug: the error names its bug report (STATE/bug-reports/)
  74  stdout could not be written (a full disk, a closed descriptor): one line on stderr says so
  141  the reader closed the pipe (`launch logs | head`): stopped quietly, as the shell's 128+SIGPIPE
\b
  launch --profile NAME             0 1 2 3 4 5   (0/3: stopped while serving it/last-good)
  launch --profile NAME --dry-run   0 2
  launch try                        0 1 2 4
  launch preflight                  0 2 4
  launch set --apply, rollback      0 1 2 3 4     (the reload's verdict; 0 also: already served;
                                                   4 and 2: refused, the running engine kept)
  launch reload                     0 1 2 3 4     (the same verdict: the unit's ExecReload=)
  launch set, install-unit, history, parse-log, logs    0 2
  launch bench, check, probe        0 1 2
  launch status                     0 3 4 6       (0 serving, 6 serving last-good, 3 not serving,
                                                   4 unknown profile)
"""

# name → (module, attribute): each subcommand lives in its own module under launcher/commands/,
# imported only when that subcommand runs (or `--help` lists them): `launch` starts fast.
COMMANDS: dict[str, tuple[str, str]] = {
    "parse-log": ("launcher.commands.parse_log", "parse_log"),
    "try": ("launcher.commands.try_cmd", "try_cmd"),
    "check": ("launcher.commands.check_cmd", "check_cmd"),
    "status": ("launcher.commands.status_cmd", "status_cmd"),
    "history": ("launcher.commands.status_cmd", "history_cmd"),
    "logs": ("launcher.commands.logs_cmd", "logs_cmd"),
    "preflight": ("launcher.commands.preflight", "preflight"),
    "install-unit": ("launcher.commands.install_unit", "install_unit"),
    "frontdoor": ("launcher.commands.frontdoor_cmd", "frontdoor_cmd"),
    "set": ("launcher.commands.set_cmd", "set_command"),
    "rollback": ("launcher.commands.rollback", "rollback"),
    "reload": ("launcher.commands.reload_cmd", "reload_command"),
    "bench": ("launcher.commands.bench_cmd", "bench_cmd"),
    "probe": ("launcher.commands.probe_cmd", "probe_cmd"),
}

# What `launch --help` lists, so listing imports no subcommand (aiohttp alone costs 0.2 s): each
# command's own first help sentence, kept equal to it by tests/unit/test_cli_start.py.
SUMMARIES: dict[str, str] = {
    "check": "Run the non-disruptive gates against the server that runs now; start, stop or change nothing.",
    "logs": "vLLM's own log (STATE/profiles/NAME/logs/engine.log, rotated) and the launcher's events "
    "(STATE/history.jsonl), interleaved by time; each line says which it is.",
    "bench": "Measure TTFT (cold and warm), TTFC, TPOT, ITL, decode and output tok/s across concurrency and "
    "context length, and flag every known benchmarking trap.",
    "frontdoor": "Run the profile's front door: one stable port for clients ([frontdoor] port), forwarding "
    "to the engine that serves now, on engine.port or supervisor.park_port.",
    "history": "The append-only record of starts, gate results, promotions and rollbacks, with fingerprints.",
    "install-unit": "Install vllm-gate@.service (instance = profile name) for systemd.",
    "parse-log": "Read a vLLM log (FILE, or - for stdin) into facts: version, model, TP, KV pool, "
    "CUDA-graph capture, and how startup ended.",
    "preflight": "Check the host before a start: GPU memory, vLLM orphans, one model per GPU, RAM, swap, "
    "port.",
    "probe": "Measure production (arm 0) and arms that change one value each, on the same GPUs, then put "
    "production back the way it ran (systemd or detached) — also after a failed arm, an error, "
    "SIGINT/SIGTERM, and (through STATE/probe/journal.json) after the probe itself was killed.",
    "reload": "Make the running launcher of a profile serve the profile as it is now, and wait for the "
    "verdict.",
    "rollback": "Restore PROFILE.toml from PROFILE.toml.bak_TAG and make the running launcher serve it.",
    "set": "Change keys of a profile; the file as it was is kept as PROFILE.toml.bak_TAG.",
    "status": "What runs now: phase, profile, engine pid, uptime, the last gates, why the last rollback "
    "happened, and whether the profile file differs from what serves.",
    "try": "Start a profile, run its gates, print the report, stop it.",
}


class LaunchGroup(click.Group):
    """A group that maps operator errors to their exit codes instead of tracebacks, and imports a
    subcommand's module only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module_name, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, from SUMMARIES: listing the commands imports none of them. Each summary is
        written whole, wrapped (click cuts them at the terminal's width with `...`)."""
        rows = [(name, self._summary(ctx, name)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _summary(self, ctx: click.Context, name: str) -> str:
        if name in SUMMARIES:
            return SUMMARIES[name]
        command = self.get_command(ctx, name)
        return command.get_short_help_str(limit=10_000) if command is not None else ""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with reader_may_close_the_pipe():  # `launch --help | head -1` prints while parsing
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> object:
        with reader_may_close_the_pipe():
            return self._invoke_mapping_errors(ctx)

    def _invoke_mapping_errors(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (BrokenPipeError, OutputLost):
            raise  # not a bug: `reader_may_close_the_pipe` ends the command with its own code
        except GateError as err:
            _print_error(err)
            ctx.exit(int(err.exit_code))
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click's own usage errors and exits keep their codes
        except Exception as err:  # a bug: report it, exit 70
            _report_bug(ctx, err)
            ctx.exit(int(ExitCode.BUG))
        return None


@contextlib.contextmanager
def reader_may_close_the_pipe() -> Iterator[None]:
    """A reader that closes the pipe (`launch logs demo | head -5`) has seen enough: stop quietly with
    the shell's 141, print nothing more and write no bug report. A stdout that refuses the answer
    (`> /dev/full`, `>&-`) ends the command with one line on stderr and 74. What is still buffered is
    flushed here, so neither surfaces at interpreter exit (Python's "Exception ignored", 120)."""
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_further_output()
        raise click.exceptions.Exit(int(ExitCode.CLOSED_PIPE)) from None
    except OutputLost as lost:
        _discard_further_output()
        mark = "<3>" if is_journal(sys.stderr) else ""
        click.echo(f"{mark}error: {lost}", err=True)
        raise click.exceptions.Exit(int(lost.exit_code)) from None


def _discard_further_output() -> None:
    """Point stdout at /dev/null: the lines still buffered, and Python's own flush at exit, then go
    nowhere instead of raising again (the recipe of Python's `signal` docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _print_error(err: GateError) -> None:
    mark = "<3>" if is_journal(sys.stderr) else ""  # journald reads a priority: "err"
    click.echo(f"{mark}error: {err.message}", err=True)
    problems = getattr(err, "problems", None)
    for problem in problems or ():
        click.echo(f"{mark}  - {problem}", err=True)
    if err.hint:
        click.echo(f"{mark}hint: {err.hint}", err=True)


def _report_bug(ctx: click.Context, err: Exception) -> None:
    """One paragraph naming the bug report; the traceback is in the file, not on the terminal."""
    from launcher.bugreport import write_bug_report  # only on this path: `launch` starts fast

    options = ctx.obj if isinstance(ctx.obj, GlobalOptions) else None
    state_dir = options.state_dir if options is not None else ctx.params.get("state_dir")
    mark = "<3>" if is_journal(sys.stderr) else ""
    try:
        path = write_bug_report(err, sys.argv, state_dir if isinstance(state_dir, Path) else None)
        where = f"the details are in {path}; please attach that file to a bug report"
    except Exception as write_err:  # noqa: BLE001 - the error path itself must not end in a traceback
        where = f"no bug report could be written ({write_err})"
    click.echo(
        f"{mark}error: launch hit an unexpected error, a bug in vllm-gate rather than in your input "
        f"({type(err).__name__}); {where}. Exit 70.",
        err=True,
    )


@click.group(
    cls=LaunchGroup,
    invoke_without_command=True,
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--profile",
    "profile",
    metavar="NAME",
    shell_complete=profile_names,
    help="Profile to start (profiles/NAME.toml).",
)
@click.option(
    "--dry-run", is_flag=True, help="Show the argv/env vLLM would get, validation and diff; start nothing."
)
@click.option("--explain", is_flag=True, help="With --dry-run: show which file each value came from.")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: one JSON object on stdout.")
@click.option("--allow-unknown", is_flag=True, help="Unknown vLLM flags become warnings (for forks).")
@click.option(
    "--retry-rejected",
    is_flag=True,
    help="Start the profile's candidate even if its gates rejected this very launch before (without "
    "it, such a start serves last-good at once and says why).",
)
@click.option(
    "--profiles-dir",
    type=click.Path(path_type=Path),
    envvar="VLLM_GATE_PROFILES",
    help="Where profiles live [env VLLM_GATE_PROFILES; default ./profiles].",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path),
    envvar="VLLM_GATE_STATE",
    help="State (last-good, history, locks, logs) [env VLLM_GATE_STATE; default /var/lib/vllm-gate "
    "as root, else $XDG_STATE_HOME/vllm-gate].",
)
@click.version_option(version=__version__, prog_name="launch")
@click.pass_context
def launch(
    ctx: click.Context,
    profile: str | None,
    dry_run: bool,
    explain: bool,
    as_json: bool,
    allow_unknown: bool,
    retry_rejected: bool,
    profiles_dir: Path | None,
    state_dir: Path | None,
) -> None:
    """Render, gate and serve vLLM profiles.

    \b
      launch --profile prod --dry-run      show exactly what would run, and what changed
      launch --profile prod                preflight, start, gate, promote or roll back
    """
    ctx.obj = GlobalOptions.resolve(profiles_dir=profiles_dir, state_dir=state_dir)
    if not colour_allowed():
        ctx.color = False  # subcommands inherit it; click.echo then strips every ANSI style
    if ctx.invoked_subcommand is not None:
        _hand_over_to_subcommand(ctx, ctx.invoked_subcommand)
        return
    if (as_json or explain) and not dry_run:
        given = "--json" if as_json else "--explain"
        raise BadInput(
            f"{given} describes a dry run, and without --dry-run `launch --profile` starts and serves",
            hint=f"to see the plan: `launch --profile {profile or 'NAME'} --dry-run {given}`; "
            "to serve, leave out " + given,
        )
    if profile is None:
        click.echo(ctx.get_help())
        return
    if dry_run:
        from launcher.commands.dry_run import run_dry_run

        ctx.exit(run_dry_run(ctx.obj, profile, explain=explain, as_json=as_json, allow_unknown=allow_unknown))
    from launcher.commands.serve import run_serve

    ctx.exit(run_serve(ctx.obj, profile, allow_unknown=allow_unknown, retry_rejected=retry_rejected))


_SUBCOMMAND_OPTIONS = ("profile", "dry_run", "explain", "as_json", "allow_unknown", "retry_rejected")


def _hand_over_to_subcommand(ctx: click.Context, name: str) -> None:
    """Options written before a subcommand (`launch --profile prod status`) go to it when it takes
    them, and are an error when it does not: never silently ignored."""
    command = launch.get_command(ctx, name)
    assert command is not None
    forwarded: dict[str, object] = {}
    for param in ctx.command.params:
        if param.name not in _SUBCOMMAND_OPTIONS:
            continue
        if ctx.get_parameter_source(param.name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        flag = param.opts[0]
        target = next((p for p in command.params if flag in getattr(p, "opts", ())), None)
        if target is None or target.name is None:
            raise BadInput(
                f"`launch {name}` does not take {flag}",
                hint=f"options before `{name}` go to it only when it has them; see `launch {name} --help`",
            )
        forwarded[target.name] = ctx.params[param.name]
    if forwarded:
        ctx.default_map = {**(ctx.default_map or {}), name: forwarded}


def main() -> None:
    reopen_closed_standard_streams()  # `launch status <&- >&-`: no file takes descriptor 0, 1 or 2
    sys.stdout = cast(TextIO, AnswerStream(sys.stdout))  # a refused answer is said, not a bug report
    sys.stderr = cast(TextIO, DiagnosticStream(sys.stderr))  # its reader may leave: see the class
    launch.main(prog_name="launch")


if __name__ == "__main__":  # pragma: no cover
    main()
