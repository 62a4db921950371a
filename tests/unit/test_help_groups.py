"""`--help` of the long commands lists every option under a heading; only --help is left over."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from launcher.cli import launch
from launcher.help_groups import GroupedCommand

HEADINGS = {
    "probe": [
        "What to compare:",
        "Measurement (overrides the bench preset):",
        "Output:",
        "Mode:",
        "Deadlines:",
    ],
    "bench": ["Server (one of --url, --profile):", "Workload:", "Output:"],
}


@pytest.mark.parametrize("name", sorted(HEADINGS))
def test_long_commands_group_every_option(name: str) -> None:
    command = launch.get_command(click.Context(launch), name)
    assert isinstance(command, GroupedCommand)
    grouped = {n for names in command.option_groups.values() for n in names}
    assert {p.name for p in command.params} == grouped  # nothing lands in "Other options" by accident
    result = CliRunner().invoke(launch, [name, "--help"])
    assert result.exit_code == 0, result.output
    positions = [result.output.index(h) for h in HEADINGS[name]]
    assert positions == sorted(positions)
    assert "\nOptions:" not in result.output
    assert result.output.rstrip().endswith("Show this message and exit.")  # --help, last


def test_an_option_left_out_of_every_group_still_shows() -> None:
    @click.command(cls=GroupedCommand, option_groups={"Main": ["alpha"]})
    @click.option("--alpha", help="in a group")
    @click.option("--beta", help="in none")
    def tool(alpha: str | None, beta: str | None) -> None: ...

    output = CliRunner().invoke(tool, ["--help"]).output
    assert (
        output.index("Main:")
        < output.index("--alpha")
        < output.index("Other options:")
        < output.index("--beta")
    )
