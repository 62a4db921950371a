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
