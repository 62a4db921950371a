"""`launch` starts fast: `--help` lists commands without importing them, and the serve path imports
the HTTP client only once the engine is spawned. Checked by what a fresh interpreter imported."""

from __future__ import annotations

import json
import subprocess
import sys

import click

from launcher.cli import COMMANDS, SUMMARIES, launch

HEAVY = ("aiohttp", "requests", "tomlkit")


def _imported_after(code: str) -> list[str]:
    probe = (
        "import json, sys\n"
        f"{code}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    run = [sys.executable, "-c", probe]
    out = subprocess.run(run, capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(out.stdout.splitlines()[-1]))


def test_help_lists_every_command_without_importing_one() -> None:
    modules = _imported_after(
        "from launcher.cli import launch\n"
        "launch.main(['--help'], prog_name='launch', standalone_mode=False)"
    )
    assert [m for m in modules if m.startswith("launcher.commands")] == []
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []


def test_every_command_has_its_own_summary() -> None:
    assert sorted(SUMMARIES) == sorted(COMMANDS), "a new command needs its line in launcher.cli.SUMMARIES"
    ctx = click.Context(launch)
    for name in COMMANDS:
        command = launch.get_command(ctx, name)
        assert command is not None
        assert SUMMARIES[name] == command.get_short_help_str(limit=10_000), name


def test_the_help_lists_every_summary_whole_wrapped_never_cut() -> None:
    text = launch.get_help(click.Context(launch, info_name="launch"))
    listing = text.split("Commands:")[1].split("Exit codes")[0]
    listed: dict[str, str] = {}
    name = ""
    for line in listing.splitlines():
        if line.strip() and line.startswith("  ") and not line.startswith("   "):  # a command's first line
            name, _, first = line.strip().partition(" ")
            listed[name] = first.strip()
        elif line.strip() and name:
            listed[name] += " " + line.strip()  # its summary, wrapped onto the next lines
    assert sorted(listed) == sorted(COMMANDS)
    assert listed == SUMMARIES
    assert "..." not in listing


def test_the_serve_path_leaves_the_http_client_for_after_the_spawn() -> None:
    modules = _imported_after("import launcher.commands.serve")
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []
