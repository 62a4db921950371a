"""`--json` on every command that prints a table (issue 44, point 4): one JSON value on stdout with
stable keys (docs/profiles.md, docs/logs.md), the human text nowhere in it, and bad input still exit 2."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from launcher.cli import launch
from launcher.profile.plan import build_plan
from tests.conftest import tree_snapshot

SET_KEYS = {"profile", "file", "tag", "valid", "diff", "keys", "argv_changes", "dependents", "warnings",
            "errors", "keep", "would_prune"}  # fmt: skip
LIST_KEYS = {"profile", "snapshots", "file_now", "serving", "pruned"}
SNAPSHOT_KEYS = {"tag", "file", "saved", "fingerprint", "problem", "serves_now", "changes"}


# The commands that print no table, each with the words of its help that say where its facts are
# as data instead (or why there are none to script against). Every other command takes --json.
NO_TABLE = {
    # writes the unit files; --dry-run prints those files themselves, as they would be written
    "launch install-unit": "Print what would be written",
    # execs Caddy; --dry-run's stdout is Caddy's JSON config, and the dry run has where it points
    "launch frontdoor": "`launch --profile NAME --dry-run --json`",
    # an action: its verdict is the exit code, its lines narrate the wait; status has the result
    "launch reload": "`launch status --profile NAME --json`",
}


def commands(command: click.Command, ctx: click.Context, path: str) -> Iterator[tuple[str, click.Command]]:
    """Every command under launch's root group (the root included, with its --dry-run), by its path."""
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from commands(sub, click.Context(sub, parent=ctx, info_name=name), f"{path} {name}")


COMMANDS = dict(commands(launch, click.Context(launch, info_name="launch"), "launch"))


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_that_prints_a_table_takes_json(path: str) -> None:
    """issue 44 point 4: a table an operator reads, a script reads as JSON, under one spelling."""
    command = COMMANDS[path]
    json_options = [p for p in command.params if isinstance(p, click.Option) and "--json" in p.opts]
    if path in NO_TABLE:
        assert json_options == [], f"{path} takes --json now: take it off NO_TABLE"
        help_text = " ".join(command.get_help(click.Context(command, info_name=path)).split())
        assert NO_TABLE[path] in help_text, f"{path}'s help must say where its facts are as data"
        return
    assert len(json_options) == 1, f"{path} prints a table and has no --json (or say why in NO_TABLE)"
    [option] = json_options
    assert option.name == "as_json" and option.is_flag and "json" in (option.help or "").lower()


def test_the_allow_list_names_only_commands_that_exist() -> None:
    assert set(NO_TABLE) <= set(COMMANDS)


def cli(profiles: Path, state: Path, *args: str) -> Result:
    return CliRunner().invoke(launch, ["--profiles-dir", str(profiles), "--state-dir", str(state), *args])


def test_set_dry_run_json_is_one_object_with_its_keys(shipped_profiles: Path, state_dir: Path) -> None:
    before = tree_snapshot(shipped_profiles)
    result = cli(
        shipped_profiles, state_dir, "set", "--profile", "prod", "max_num_seqs=16", "--dry-run", "--json"
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert set(shown) == SET_KEYS and shown["valid"] is True and shown["tag"] is None
    assert shown["keys"] == [{"key": "args.max_num_seqs", "old": "32", "new": "16"}]
    assert {"kind": "changed", "what": "--max-num-seqs", "old": "32", "new": "16"} in shown["argv_changes"]
    assert "+max_num_seqs = 16" in shown["diff"] and shown["errors"] == []
    assert tree_snapshot(shipped_profiles) == before


def test_set_dry_run_json_with_errors_still_prints_the_object_and_exits_2(
    shipped_profiles: Path, state_dir: Path
) -> None:
    result = cli(shipped_profiles, state_dir, "set", "prod", "max_num_seq=16", "--dry-run", "--json")
    assert result.exit_code == 2
    shown = json.loads(result.stdout)
    assert shown["valid"] is False and "did you mean max_num_seqs?" in shown["errors"][0]
    assert result.stderr.startswith("error:")


def test_secrets_stay_masked_in_the_json(shipped_profiles: Path, state_dir: Path) -> None:
    result = cli(
        shipped_profiles, state_dir, "set", "prod", "env.HF_TOKEN=hf_live_123456", "--dry-run", "--json"
    )
    assert result.exit_code == 0, result.output
    assert "hf_live_123456" not in result.stdout and json.loads(result.stdout)["keys"][0]["new"] == "***"


def test_json_without_dry_run_or_list_is_refused_and_writes_nothing(
    shipped_profiles: Path, state_dir: Path
) -> None:
    before = tree_snapshot(shipped_profiles)
    refused = cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=16", "--tag", "t", "--json")
    assert refused.exit_code == 2 and "--json describes a dry run" in refused.output
    refused = cli(shipped_profiles, state_dir, "rollback", "t", "--profile", "prod", "--json")
    assert refused.exit_code == 2 and "--json goes with --list" in refused.output
    assert tree_snapshot(shipped_profiles) == before


def test_rollback_list_json(shipped_profiles: Path, state_dir: Path) -> None:
    assert cli(shipped_profiles, state_dir, "set", "prod", "max_num_seqs=8", "--tag", "seqs8").exit_code == 0
    os.utime(shipped_profiles / "prod.toml.bak_seqs8", (1_780_000_000, 1_780_000_000))
    (shipped_profiles / "prod.toml.bak_broken").write_text("[args\n")
    served = build_plan(
        shipped_profiles, "prod", top_file=shipped_profiles / "prod.toml.bak_seqs8"
    ).fingerprint()
    status = state_dir / "profiles" / "prod" / "status.json"
    status.write_text(json.dumps({"phase": "serving", "serving_fingerprint": served}))
    result = cli(shipped_profiles, state_dir, "rollback", "--list", "--profile", "prod", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert set(shown) == LIST_KEYS and [s["tag"] for s in shown["snapshots"]] == ["broken", "seqs8"]
    broken, seqs8 = shown["snapshots"]
    assert set(broken) == set(seqs8) == SNAPSHOT_KEYS
    assert (
        broken["fingerprint"] is None and "does not render" in broken["problem"] and broken["changes"] is None
    )
    assert seqs8["saved"] == "2026-05-28T20:26:40Z" and seqs8["serves_now"] is True
    assert seqs8["changes"] == [{"kind": "changed", "what": "--max-num-seqs", "old": "8", "new": "32"}]
    assert shown["serving"] == {"fingerprint": served, "phase": "serving"}
    assert shown["file_now"]["problem"] is None and shown["file_now"]["file"].endswith("prod.toml")
    assert shown["pruned"] | {"record": "R"} == {
        "snapshots": 0,
        "replaced": 0,
        "last": None,
        "record": "R",
        "problem": None,
    }
