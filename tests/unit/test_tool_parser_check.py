"""A tool-call parser the installed vLLM does not register is refused before anything stops.

On the H200, `launch set tiny tool_call_parser=hermez --apply` stopped production, waited 26.5 s for
vLLM's imports to reach `KeyError: 'invalid tool call parser'`, then 54 s for last-good to come back
(docs/real-vllm.md step 5). The names come from the installed vLLM (here the stand-in of
tests/fake_vllm.py, which registers hermes, mistral and qwen3_xml).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fake_vllm import env_with, make_fake_vllm

PROFILE = """[engine]
model = "/models/m"

[args]
enable_auto_tool_choice = true
tool_call_parser = "hermes"
"""


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_with(make_fake_vllm(tmp_path / "site"), tmp_path / "cache", tmp_path / "builds")
    argv = [sys.executable, "-m", "launcher.cli", "--profiles-dir", str(tmp_path / "profiles"),
            "--state-dir", str(tmp_path / "state"), *args]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_set_refuses_an_unregistered_parser_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    path = tmp_path / "profiles" / "prod.toml"
    path.write_text(PROFILE)
    assert _launch(tmp_path, "--profile", "prod", "--dry-run").returncode == 0
    refused = _launch(tmp_path, "set", "prod", "tool_call_parser=hermez", "--tag", "bad", "--apply")
    assert refused.returncode == 2, refused.stderr
    assert (
        "args.tool_call_parser = 'hermez': vLLM 9.9.9 registers no such tool parser; did you mean hermes?"
        in (refused.stderr)
    )
    assert path.read_text() == PROFILE and not list(path.parent.glob("*.bak_*"))


def test_a_plugin_or_no_auto_tool_choice_makes_it_a_warning_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    path = tmp_path / "profiles" / "prod.toml"
    path.write_text(PROFILE.replace('"hermes"', '"my_parser"\ntool_parser_plugin = "/opt/p.py"'))
    assert _launch(tmp_path, "--profile", "prod", "--dry-run").returncode == 0
    path.write_text(PROFILE.replace("true", "false").replace('"hermes"', '"hermez"'))
    shown = _launch(tmp_path, "--profile", "prod", "--dry-run")
    assert shown.returncode == 0 and "registers no such tool parser" in shown.stdout + shown.stderr


SIM_PROFILE = """[engine]
command = ["vllm-sim", "serve"]
model = "test/sim-1b"

[args]
enable_auto_tool_choice = true
"""


def _dry_run(tmp_path: Path, profile_text: str) -> subprocess.CompletedProcess[str]:
    """A dry run on a host without vLLM: what the simulator's profiles meet."""
    (tmp_path / "profiles").mkdir(exist_ok=True)
    (tmp_path / "profiles" / "p.toml").write_text(profile_text)
    argv = [sys.executable, "-m", "launcher.cli", "--profiles-dir", str(tmp_path / "profiles"),
            "--state-dir", str(tmp_path / "state"), "--profile", "p", "--dry-run"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_simulators_names_refuse_a_typo_with_a_did_you_mean(tmp_path: Path) -> None:
    tool = _dry_run(tmp_path, SIM_PROFILE + 'tool_call_parser = "hermess"\n')
    assert tool.returncode == 2, tool.stdout + tool.stderr
    assert (
        "args.tool_call_parser = 'hermess': vllm-sim (vLLM 0.33) registers no such tool parser; did you mean "
        "hermes? (vLLM refuses to start: invalid tool call parser)" in tool.stdout + tool.stderr
    )
    reasoning = _dry_run(tmp_path, SIM_PROFILE + 'tool_call_parser = "hermes"\nreasoning_parser = "qwen4"\n')
    assert reasoning.returncode == 2
    assert "registers no such reasoning parser; did you mean qwen3?" in reasoning.stdout + reasoning.stderr
    fine = _dry_run(tmp_path, SIM_PROFILE + 'tool_call_parser = "hermes"\nreasoning_parser = "qwen3"\n')
    assert fine.returncode == 0 and "registers no such" not in fine.stdout + fine.stderr


def test_names_not_known_here_are_not_checked_or_only_warned(tmp_path: Path) -> None:
    """The simulator speaking 0.26 registers 0.26's names (not listed here): nothing is checked. A
    real vLLM not importable here may be newer than the snapshot: its typo is a warning."""
    old_sim = _dry_run(tmp_path, SIM_PROFILE + 'tool_call_parser = "hermes"\nreasoning_parser = "qwen4"\n'
                       'sim_vllm_version = "0.26"\n')  # fmt: skip
    assert old_sim.returncode == 0 and "registers no such" not in old_sim.stdout + old_sim.stderr
    real = _dry_run(tmp_path, PROFILE.replace('"hermes"', '"hermess"'))
    assert real.returncode == 0, real.stdout + real.stderr
    assert "vLLM 0.33.0 (the snapshot; none here) registers no such tool parser; did you mean hermes?" in (
        real.stdout + real.stderr
    )
