"""`launch parse-log FILE`: what a vLLM log proves the server did (docs/logs.md lists every fact)."""

from __future__ import annotations

import json

import click

from launcher.logfacts import parse_file
from launcher.logfacts.report import render_events, render_report


@click.command("parse-log")
@click.argument("log_file", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (null where the log does not say).")
@click.option(
    "--marker",
    "markers",
    multiple=True,
    metavar="REGEX",
    help="Kernel-marker pattern to look for, e.g. IQ4XS_BMMVQ_READY (repeatable).",
)
@click.option("--events", "with_events", is_flag=True, help="Also list the startup events, in log order.")
def parse_log(log_file: str, as_json: bool, markers: tuple[str, ...], with_events: bool) -> None:
    """Read a vLLM log (FILE, or - for stdin) into facts: version, model, TP, KV pool,
    CUDA-graph capture, and how startup ended. Exit 0 whatever the log says; 2 if unreadable."""
    facts, events = parse_file(log_file, markers, events=with_events)
    if as_json:
        payload = facts.to_json()
        if with_events:
            payload["events"] = [e.to_json() for e in events]
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    click.echo(render_report(facts))
    if with_events:
        click.echo("")
        click.echo(render_events(events))
