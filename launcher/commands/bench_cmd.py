"""`launch bench`: measure a running server honestly (docs/bench.md); it never starts one."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import click

from launcher.bench.client import Client
from launcher.bench.options import DEFAULT_CONTEXTS, BenchOptions, parse_concurrency
from launcher.bench.plots import plot
from launcher.bench.progress import Progress
from launcher.bench.report import LEGEND, RecordSink, explain, latency_table, table, write_summary
from launcher.bench.results import RunResult
from launcher.bench.runner import Runner
from launcher.bench.target import Endpoint, api_key_from_env, discover, from_profile, from_url
from launcher.commands.profile_arg import profile_option
from launcher.errors import BadInput, NothingMeasured
from launcher.help_groups import GroupedCommand
from launcher.settings import GlobalOptions

STARTS_SHOWN = 10  # the profile's last starts in summary.json and start_time.png


@click.command(
    "bench",
    cls=GroupedCommand,
    option_groups={
        "Server (one of --url, --profile)": ["url", "profile", "model", "api_key_env"],
        "Workload": ["concurrency", "contexts", "rounds", "max_tokens", "prompts", "temperature"],
        "Output": ["out_dir", "as_json", "no_plots"],
    },
)
@click.option("--url", metavar="URL", help="The server to measure, e.g. http://127.0.0.1:8000.")
@profile_option("Measure the server profile NAME describes (must run).")
@click.option("--model", metavar="NAME", help="Model name to send [default: from the profile or /v1/models].")
@click.option(
    "--concurrency", default="1,2,4,8", show_default=True, help="Concurrency levels, comma-separated."
)
@click.option(
    "--contexts", default=DEFAULT_CONTEXTS, show_default=True, help="short and/or lengths: 8k,28k,64k."
)
@click.option(
    "--rounds", type=click.IntRange(min=1), default=3, show_default=True, help="Timed rounds per cell."
)
@click.option("--max-tokens", type=click.IntRange(min=1), default=512, show_default=True, help="Per request.")
@click.option("--prompts", type=click.IntRange(min=1), default=8, show_default=True, help="Distinct prompts.")
@click.option(
    "--temperature",
    type=click.FloatRange(0, 2),
    default=0.7,
    show_default=True,
    help="Sampling temperature (0 = greedy; identical copies are then flagged).",
)
@click.option(
    "--out", "out_dir", type=click.Path(path_type=Path), help="Output folder [default: out/bench-STAMP]."
)
@click.option("--api-key-env", metavar="NAME", help="Environment variable holding the API key.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the summary JSON on stdout instead of the tables (as written to OUT/summary.json).",
)
@click.option("--no-plots", is_flag=True, help="Do not draw PNG plots.")
@click.pass_obj
def bench_cmd(
    options: GlobalOptions,
    url: str | None,
    profile: str | None,
    model: str | None,
    concurrency: str,
    contexts: str,
    rounds: int,
    max_tokens: int,
    prompts: int,
    temperature: float,
    out_dir: Path | None,
    api_key_env: str | None,
    as_json: bool,
    no_plots: bool,
) -> None:
    """Measure TTFT (cold and warm), TTFC, TPOT, ITL, decode and output tok/s across concurrency and context
    length, and flag every known benchmarking trap.

    \b
      launch bench --url http://127.0.0.1:8000 --concurrency 1,8,32 --contexts short,8k,28k
      launch bench --profile demo --json
    """
    from launcher.bench.workload import parse_contexts

    if (url is None) == (profile is None):
        raise BadInput(
            "bench needs exactly one of --url and --profile", hint="e.g. --url http://127.0.0.1:8000"
        )
    bench = BenchOptions(
        concurrency=parse_concurrency(concurrency),
        contexts=parse_contexts(contexts),
        rounds=rounds,
        max_tokens=max_tokens,
        prompts=prompts,
        temperature=temperature,
    )
    key = api_key_from_env(api_key_env)
    endpoint = (
        from_url(url, model, key)
        if url
        else from_profile(options.profiles_dir, options.state_dir, str(profile), model, key)
    )
    run_id = uuid.uuid4().hex[:8]
    folder = out_dir or Path("out") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{run_id}"
    result = asyncio.run(_measure(endpoint, bench, run_id, folder))
    summary = {
        "profile": profile,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **result.as_json(),
    }
    if profile is not None:
        summary["starts"] = _recorded_starts(options.state_dir, profile, summary["notes"])
    summary["files"] = {"requests": str(folder / "requests.jsonl"), "summary": str(folder / "summary.json")}
    if not no_plots:
        written, note = plot(summary, folder)
        summary["files"]["plots"] = [str(p) for p in written]
        if note:
            summary["notes"].append(note)
    write_summary(folder / "summary.json", summary)
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False, indent=2))
    else:
        _print_report(result, summary, folder)
    _refuse_empty(result, folder)


def _print_report(result: RunResult, summary: dict[str, Any], folder: Path) -> None:
    click.echo(table(result))
    click.echo(LEGEND)
    click.echo()
    click.echo(latency_table(result))
    click.echo()
    click.echo(explain(result) + "".join(f"\nnote: {n}" for n in summary["notes"][len(result.notes) :]))
    click.echo(
        f"\nwritten: {folder}/summary.json, {folder}/requests.jsonl"
        + "".join(f", {p}" for p in summary["files"].get("plots", []))
    )


def _recorded_starts(state_dir: Path, profile: str, notes: list[str]) -> list[dict[str, Any]]:
    """The profile's last starts that recorded a timeline, for the start-time chart; an unreadable
    history costs the chart, with a note, never the measurement just made."""
    from launcher.logfacts.timeline_report import recorded_starts
    from launcher.state.store import StateStore
    from launcher.supervisor.history import History

    try:
        records = History(StateStore(state_dir).history_path).read(profile=profile)
    except BadInput as err:
        notes.append(f"start-time chart skipped: {err}")
        return []
    return recorded_starts(records, STARTS_SHOWN)


def _refuse_empty(result: RunResult, folder: Path) -> None:
    """Exit 1 when no request of any cell succeeded: a report of dashes is not a measurement."""
    if any(cell.vllm_bench["completed"] for cell in result.cells):
        return
    failed = [r for cell in result.cells for r in cell.records if not r.ok]
    why = f"all {len(failed)} timed requests failed" if failed else "no cell was run"
    first = next((r.error or f"HTTP {r.status}" for r in failed), None)
    raise NothingMeasured(
        f"nothing was measured: {why}" + (f" (first: {first})" if first else ""),
        hint=f"see {folder}/requests.jsonl and the notes above",
    )


async def _measure(endpoint: Endpoint, bench: BenchOptions, run_id: str, folder: Path) -> RunResult:
    async with Client(
        endpoint.base_url, api_key=endpoint.api_key, read_timeout_s=bench.request_timeout_s
    ) as client:
        target = await discover(client, endpoint)  # unreachable: exit 2 before anything is written
        sink = RecordSink(folder / "requests.jsonl").open()
        progress = Progress(1)
        try:
            return await Runner(client, target, bench, run_id=run_id, progress=progress, sink=sink).run()
        finally:
            progress.close()
            sink.close()
