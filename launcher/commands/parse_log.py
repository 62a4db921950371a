"""`launch parse-log` (placeholder until the log-facts module lands)."""

from __future__ import annotations

import click


@click.command("parse-log")
def parse_log() -> None:
    """Read a vLLM log into facts."""
    raise click.UsageError("parse-log is not built yet")
