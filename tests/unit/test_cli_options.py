"""No surprise starts, no silently ignored options, and one exit-code table in `--help` and docs/."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from launcher.cli import COMMANDS, launch
from launcher.errors import ExitCode
from tests.conftest import REPO, SHIPPED_PROFILES, tree_snapshot


def run(state: Path, *args: str) -> Result:
    return CliRunner().invoke(
        launch, ["--profiles-dir", str(SHIPPED_PROFILES), "--state-dir", str(state), *args]
    )


@pytest.mark.parametrize("flag", ["--json", "--explain"])
def test_dry_run_flags_without_dry_run_start_nothing_and_exit_2(flag: str, state_dir: Path) -> None:
    result = run(state_dir, "--profile", "demo", flag)
    assert result.exit_code == 2, result.output
    assert f"hint: to see the plan: `launch --profile demo --dry-run {flag}`" in result.output
    assert tree_snapshot(state_dir) == {}  # no lock, no status, no history: nothing was started


def test_an_option_before_a_subcommand_goes_to_it_when_it_takes_it(state_dir: Path) -> None:
    for name in ("demo", "prod"):
        (state_dir / "profiles" / name).mkdir(parents=True)
        (state_dir / "profiles" / name / "status.json").write_text(
            f'{{"phase": "stopped", "profile": "{name}", "launcher_pid": 0}}'
        )
    result = run(state_dir, "--profile", "prod", "status")
    assert result.exit_code == 3, result.output  # stopped: not serving (launch status's exit codes)
    assert result.output.startswith("prod: stopped") and "demo" not in result.output


def test_an_option_a_subcommand_does_not_take_is_an_error(state_dir: Path) -> None:
    result = run(state_dir, "--dry-run", "status")
    assert result.exit_code == 2
    assert "`launch status` does not take --dry-run" in result.output and "Traceback" not in result.output


def test_every_exit_code_and_command_is_in_the_one_table() -> None:
    doc = (REPO / "docs" / "exit-codes.md").read_text(encoding="utf-8")
    help_text = CliRunner().invoke(launch, ["--help"]).output
    for code in ExitCode:
        assert f"| {int(code)} |" in doc, code
        assert f"  {int(code)}  " in help_text, code
    for name in COMMANDS:
        assert name in doc, f"docs/exit-codes.md does not list `launch {name}`"


def test_every_command_takes_the_profile_as_profile_and_the_old_first_argument_still_works(
    shipped_profiles: Path, state_dir: Path
) -> None:
    """One convention, `--profile NAME` (also before the subcommand); `set PROFILE …` and
    `logs NAME` as they were."""
    for words in (
        ["set", "--profile", "prod", "max_num_seqs=8", "--dry-run"],
        ["--profile", "prod", "set", "max_num_seqs=8", "--dry-run"],
        ["set", "prod", "max_num_seqs=8", "--dry-run"],
    ):
        result = run(state_dir, "--profiles-dir", str(shipped_profiles), *words)
        assert result.exit_code == 0 and "--max-num-seqs 8" in result.output, (words, result.output)
    (state_dir / "profiles" / "prod" / "logs").mkdir(parents=True)
    (state_dir / "profiles" / "prod" / "logs" / "engine.log").write_text(
        "(APIServer pid=1) INFO 12-03 11:29:47 [a.py:1] hello\n"
    )
    for words in (["logs", "--profile", "prod"], ["--profile", "prod", "logs"], ["logs", "prod"]):
        result = run(state_dir, *words)
        assert result.exit_code == 0 and "hello" in result.output, (words, result.output)
    for words, said in (
        (["logs", "prod", "--profile", "demo"], "`launch logs` was given two profiles"),
        (["logs"], "`launch logs` needs a profile"),
        (["set", "max_num_seqs=8", "--tag", "t"], "`launch set` needs a profile"),
        (["set", "--profile", "prod", "--tag", "t", "demo"], "`launch set` was given two profiles"),
    ):
        result = run(state_dir, "--profiles-dir", str(shipped_profiles), *words)
        assert result.exit_code == 2 and said in result.output, (words, result.output)


def test_shell_completion_as_readme_documents_it(tmp_path: Path) -> None:
    """Click's completion through the lazily imported commands: names, then a command's options."""
    import os
    import subprocess
    import sys

    launch_bin = Path(sys.executable).with_name("launch")

    def complete(words: str, cword: int) -> list[str]:
        env = {
            **os.environ,
            "_LAUNCH_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
        }
        done = subprocess.run(
            [str(launch_bin)], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert complete("launch ro", 1) == ["rollback"]
    assert "--list" in complete("launch rollback --", 2)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert 'eval "$(_LAUNCH_COMPLETE=bash_source launch)"' in readme
    source = subprocess.run([str(launch_bin)], env={**os.environ, "_LAUNCH_COMPLETE": "bash_source"},
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert "_launch_completion()" in source.stdout


def test_the_quick_start_says_where_state_goes_and_how_to_choose() -> None:
    quick_start = (REPO / "README.md").read_text(encoding="utf-8").split("## Everyday use")[0]
    wanted = ("/var/lib/vllm-gate", "as root", "~/.local/state/vllm-gate", "--state-dir", "VLLM_GATE_STATE",
              "launch --profile demo")  # fmt: skip
    for words in wanted:
        assert words in quick_start, words
