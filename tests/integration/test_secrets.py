"""Secrets never printed: not by the dry run (also when it refuses), not in a diff, not in the
engine log, even when vLLM prints its `api_key` in the `non-default args` line."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from launcher.profile.diff import diff_launches
from launcher.supervisor.engine import EngineProcess
from tests.launcher_run import LAUNCH

pytestmark = pytest.mark.integration
KEY = "sk-live-4f9a8b7c6d5e"


def test_a_literal_key_is_refused_without_being_printed(profiles_dir: Path, state_dir: Path) -> None:
    (profiles_dir / "leaky.toml").write_text(
        '[engine]\ncommand = ["vllm-sim", "serve"]\nmodel = "demo/tiny"\nport = 8399\n'
        f'[args]\napi_key = "{KEY}"\n'
    )
    base = [
        str(LAUNCH),
        "--profiles-dir",
        str(profiles_dir),
        "--state-dir",
        str(state_dir),
        "--profile",
        "leaky",
    ]
    for extra in (["--dry-run"], ["--dry-run", "--json"], ["--dry-run", "--explain"], []):
        run = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 2, (extra, run.stdout, run.stderr)
        assert KEY not in run.stdout + run.stderr, extra
    assert not any(KEY in p.read_text(errors="replace") for p in state_dir.rglob("*") if p.is_file())


def test_a_diff_never_shows_a_key() -> None:
    old = ["vllm", "serve", "m", "--api-key", "sk-old-000000"]
    new = ["vllm", "serve", "m", f"--api-key={KEY}"]
    text = "\n".join(
        line for c in diff_launches(old, {"HF_TOKEN": "hf_secret"}, new, {}) for line in c.lines()
    )
    assert "sk-old" not in text and KEY not in text and "hf_secret" not in text


# Prints the line vLLM 0.26/0.33 prints at startup, the key split across two writes, then the key
# from its environment in another line.
PRINTER = (
    "import os, sys, time\n"
    "sys.stdout.write(\"(APIServer pid=1) INFO [utils.py:233] non-default args: \")\n"
    "sys.stdout.write(\"{'model_tag': 'm', 'api_key': ['sk-live-4f\")\n"
    "sys.stdout.flush(); time.sleep(0.05)\n"
    "sys.stdout.write(\"9a8b7c6d5e'], 'port': 8000}\\n\")\n"
    "print('key from env:', os.environ['VLLM_API_KEY'], flush=True)\n"
)


def test_the_engine_log_masks_a_key_vllm_prints(tmp_path: Path) -> None:
    seen: list[str] = []
    done = threading.Event()
    engine = EngineProcess(
        [sys.executable, "-c", PRINTER], {"VLLM_API_KEY": "env-key-123456", "PATH": "/usr/bin:/bin"},
        sink=lambda _stream, text: seen.append(text),
    )  # fmt: skip
    engine.on_exit(done.set)
    engine.start()
    assert done.wait(timeout=30)
    engine.stop(grace_s=5)
    text = "".join(seen)
    assert "'api_key': '***', 'port': 8000}" in text, text
    assert "key from env: ***" in text
    assert KEY not in text and "sk-live" not in text and "env-key-123456" not in text
