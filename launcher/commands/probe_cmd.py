"""`launch probe`: A/B arms on the production box, production measured as arm 0 and always restored."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from launcher.commands.profile_arg import profile_option
from launcher.errors import BadInput, ExitCode
from launcher.help_groups import GroupedCommand
from launcher.probe.recovery import DEFAULT_RESTORE_TIMEOUT_S
from launcher.probe.results import (
    DEFAULT_RELEASE_TIMEOUT_S,
    DEFAULT_RUNS,
    DEFAULT_STOP_TIMEOUT_S,
    DEFAULT_WARMUP_REQUESTS,
    Settings,
)
from launcher.settings import GlobalOptions

if TYPE_CHECKING:
    from launcher.probe.arms import Arm
    from launcher.probe.production import Production


@click.command(
    "probe",
    cls=GroupedCommand,
    option_groups={
        "What to compare": ["profile", "arm_specs", "runs", "warmup"],
        "Measurement (overrides the bench preset)": [
            "preset",
            "concurrency",
            "contexts",
            "rounds",
            "max_tokens",
            "prompts",
        ],
        "Output": ["out_dir", "as_json", "no_plots"],
        "Mode": ["dry_run", "recover", "allow_unknown"],
        "Deadlines": ["stop_timeout_s", "release_timeout_s", "restore_timeout_s"],
    },
)
@profile_option("The production profile (arm 0).")
@click.option(
    "--arm",
    "arm_specs",
    multiple=True,
    metavar="NAME:KEY=VALUE",
    help="An arm: production with KEY set to VALUE (as `launch set`); repeat NAME to add keys.",
)
@click.option(
    "--runs", type=click.IntRange(min=1), default=DEFAULT_RUNS, show_default=True, help="Bench runs per arm."
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=DEFAULT_WARMUP_REQUESTS,
    show_default=True,
    help="Untimed requests before an arm's first run.",
)
@click.option(
    "--bench", "preset", default="quick", show_default=True, help="Bench preset: quick or standard."
)
@click.option("--concurrency", help="Override the preset's concurrency levels, e.g. 1,8.")
@click.option("--contexts", help="Override the preset's contexts, e.g. short,8k.")
@click.option("--rounds", type=click.IntRange(min=1), help="Override the preset's rounds per cell.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Override the preset's max_tokens.")
@click.option("--prompts", type=click.IntRange(min=1), help="Override the preset's distinct prompts.")
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path), help="Output folder [default: out/probe-STAMP]."
)
@click.option(
    "--dry-run", is_flag=True, help="Print the arms, argv diffs and expected downtime; touch nothing."
)
@click.option(
    "--recover", is_flag=True, help="Finish what a killed probe left: end its arm, restore production."
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print probe.json on stdout instead of the report; with --dry-run, the plan as one JSON object.",
)
@click.option("--no-plots", is_flag=True, help="Do not draw probe.png.")
@click.option("--allow-unknown", is_flag=True, help="Unknown vLLM flags become warnings (for forks).")
@click.option(
    "--stop-timeout-s",
    type=float,
    default=DEFAULT_STOP_TIMEOUT_S,
    show_default=True,
    help="Wait this long for production's launcher to exit.",
)
@click.option(
    "--release-timeout-s",
    type=float,
    default=DEFAULT_RELEASE_TIMEOUT_S,
    show_default=True,
    help="Wait this long for the port and GPU memory before an arm starts.",
)
@click.option(
    "--restore-timeout-s",
    type=float,
    default=DEFAULT_RESTORE_TIMEOUT_S,
    show_default=True,
    help="Wait this long for production to serve again.",
)
@click.pass_obj
def probe_cmd(
    options: GlobalOptions,
    profile: str | None,
    arm_specs: tuple[str, ...],
    runs: int,
    warmup: int,
    preset: str,
    concurrency: str | None,
    contexts: str | None,
    rounds: int | None,
    max_tokens: int | None,
    prompts: int | None,
    out_dir: Path | None,
    dry_run: bool,
    recover: bool,
    as_json: bool,
    no_plots: bool,
    allow_unknown: bool,
    stop_timeout_s: float,
    release_timeout_s: float,
    restore_timeout_s: float,
) -> None:
    """Measure production (arm 0) and arms that change one value each, on the same GPUs, then put
    production back the way it ran (systemd or detached) — also after a failed arm, an error,
    SIGINT/SIGTERM, and (through STATE/probe/journal.json) after the probe itself was killed.

    \b
      launch probe --profile prod --arm util030:gpu_memory_utilization=0.30 \\
                   --arm gdn0:env.VLLM_SM70_QWEN_GDN_FULL_FORWARD=0 --runs 2 --bench quick
      launch probe --profile prod --arm seqs32:max_num_seqs=32 --dry-run
      launch probe --recover

    \b
    Exit codes: 0 done and production serves (or was not running); 1 production is not back, or
    the probe was interrupted or failed; 2 bad input (nothing was touched).
    """
    from launcher.probe.arms import build_arms, parse_arm_specs
    from launcher.probe.presets import bench_options
    from launcher.probe.production import discover

    ctx = click.get_current_context()
    if recover:
        ctx.exit(_recover(options, restore_timeout_s, as_json))
    if profile is None:
        raise BadInput("launch probe needs --profile NAME (the production profile)", hint="or --recover")
    if not arm_specs:
        raise BadInput(
            "give at least one --arm NAME:KEY=VALUE", hint="e.g. --arm util030:gpu_memory_utilization=0.30"
        )
    arms = build_arms(
        options.profiles_dir, profile, parse_arm_specs(arm_specs, profile), allow_unknown=allow_unknown
    )
    bench = bench_options(
        preset,
        concurrency=concurrency,
        contexts=contexts,
        rounds=rounds,
        max_tokens=max_tokens,
        prompts=prompts,
    )
    folder = out_dir or Path("out") / f"probe-{time.strftime('%Y%m%d-%H%M%S')}"
    settings = Settings(
        bench,
        preset,
        folder,
        runs,
        warmup,
        stop_timeout_s,
        release_timeout_s,
        restore_timeout_s,
        allow_unknown,
    )
    production = discover(options.state_dir, profile)
    if dry_run:
        ctx.exit(_dry_run(options, arms, production, settings, as_json=as_json))
    ctx.exit(_probe(options, arms, settings, as_json=as_json, plots=not no_plots))


def _dry_run(
    options: GlobalOptions, arms: list[Arm], production: Production, settings: Settings, *, as_json: bool
) -> int:
    from launcher.probe.preview import preview_json, render_preview, start_times
    from launcher.probe.session import check_production
    from launcher.state.store import StateStore
    from launcher.supervisor.history import History

    times = start_times(History(StateStore(options.state_dir).history_path), arms[0].name)
    refused: str | None = None
    try:
        check_production(production, arms[0])
    except BadInput as err:
        refused = err.message
    if as_json:
        shown = preview_json(arms, production, settings, times) | {"would_refuse": refused}
        click.echo(json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(render_preview(arms, production, settings, times))
    if refused is not None:
        said = f"the real run would refuse: {refused}"
        click.echo(f"error: {said}" if as_json else f"\n{said}", err=as_json)  # --json: stdout is JSON alone
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.OK)


def _probe(options: GlobalOptions, arms: list[Arm], settings: Settings, *, as_json: bool, plots: bool) -> int:
    from launcher.probe.compare import compare
    from launcher.probe.plot import plot
    from launcher.probe.report import markdown, restore_text, to_json
    from launcher.probe.session import ProbeSession
    from launcher.supervisor.progress import configure_logging
    from launcher.supervisor.wiring import host_hooks

    configure_logging()
    result = ProbeSession(options, arms, settings, hooks=host_hooks(options, arms[0].name)).run()
    compared = compare([(run.arm.name, run.summaries) for run in result.runs])
    folder = settings.out_dir
    folder.mkdir(parents=True, exist_ok=True)
    data = to_json(result, compared)
    note = plot(compared, folder / "probe.png") if plots else "probe.png not drawn (--no-plots)"
    if note:
        data["notes"].append(note)
    report = markdown(result, compared) + (f"\nnote: {note}\n" if note else "")
    (folder / "report.md").write_text(report, encoding="utf-8")
    (folder / "probe.json").write_text(
        json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    click.echo(json.dumps(data, indent=2, ensure_ascii=False) if as_json else report, nl=as_json)
    click.echo(
        f"written: {folder}/report.md, {folder}/probe.json" + ("" if note else f", {folder}/probe.png"),
        err=True,
    )
    if not result.production_back:
        click.echo(f"error: production is NOT back: {restore_text(result)}", err=True)
        click.echo("hint: `launch status`; `launch probe --recover` retries the restore", err=True)
        return int(ExitCode.GATE_FAILED)
    return int(ExitCode.GATE_FAILED if result.interrupted_by or result.error else ExitCode.OK)


def _recover(options: GlobalOptions, timeout_s: float, as_json: bool) -> int:
    from launcher.probe.recovery import recover
    from launcher.supervisor.progress import configure_logging

    if as_json:  # refused before anything is touched: the verdict is the exit code
        raise BadInput(
            "--json goes with a probe or its --dry-run; --recover's verdict is its exit code",
            hint="then `launch status --profile NAME --json` says what serves; "
            "`launch history --json` holds the probe_recovered record",
        )
    configure_logging()
    restored = recover(options.state_dir, timeout_s=timeout_s)
    if restored is None:
        click.echo(f"no probe journal in {options.state_dir}/probe: nothing to recover")
        return int(ExitCode.OK)
    if restored.arm_leftovers:
        click.echo(f"ended arm processes left by the probe: {list(restored.arm_leftovers)}")
    serving = restored.serving
    if serving is None:
        click.echo(restored.action)
        return int(ExitCode.OK)
    click.echo(f"{restored.action}: {serving.phase} after {serving.seconds:.1f} s")
    if not restored.ok:
        click.echo("error: production is not serving; the journal is kept so this can be retried", err=True)
        return int(ExitCode.GATE_FAILED)
    return int(ExitCode.OK)
