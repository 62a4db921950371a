"""The installed vLLM's schema is read from vLLM once, then from the cache until vLLM changes.

A stand-in `vllm` package (argparse only) counts how often its parser is built; each reading runs in
a fresh interpreter, as each `launch` command does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

FAKE_VLLM = {
    "__init__.py": '__version__ = "9.9.9"\n',
    "envs.py": 'environment_variables = {"VLLM_FAKE_FLAG": None}\n',
    "platforms/__init__.py": (
        "class FakePlatform:\n    def is_unspecified(self):\n        return False\n"
        "current_platform = FakePlatform()\n"
    ),
    "utils/__init__.py": "import argparse\nFlexibleArgumentParser = argparse.ArgumentParser\n",
    "entrypoints/__init__.py": "",
    "entrypoints/openai/__init__.py": "",
    "entrypoints/openai/cli_args.py": (
        "import os\n"
        "def make_arg_parser(parser):\n"
        "    with open(os.environ['BUILDS'], 'a') as f:\n        f.write('built\\n')\n"
        "    parser.add_argument('--max-num-seqs', type=int)\n"
        "    parser.add_argument('--enforce-eager', action='store_true')\n"
        "    return parser\n"
    ),
}

READ = (
    "import json; from launcher.profile.schema import load_schema; s = load_schema(); "
    "print(json.dumps({'origin': s.origin, 'options': sorted(s.options)}))"
)


def _fake_vllm(root: Path) -> Path:
    for name, text in FAKE_VLLM.items():
        path = root / "vllm" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _read(site: Path, cache: Path, builds: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{site}", "VLLM_GATE_CACHE": str(cache),
           "BUILDS": str(builds)}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", READ], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_parser_is_built_once_then_read_from_the_cache_until_vllm_changes(tmp_path: Path) -> None:
    site, cache, builds = _fake_vllm(tmp_path / "site"), tmp_path / "cache", tmp_path / "builds"
    first = _read(site, cache, builds)
    assert first["origin"] == "installed vllm 9.9.9"
    assert "--max-num-seqs" in first["options"] and "--enforce-eager" in first["options"]  # type: ignore[operator]
    second = _read(site, cache, builds)
    assert str(second["origin"]).startswith("installed vllm 9.9.9 (cached vllm-")
    assert second["options"] == first["options"]
    assert builds.read_text().count("built") == 1, "the second run imported vLLM again"

    cli_args = site / "vllm" / "entrypoints" / "openai" / "cli_args.py"
    cli_args.write_text(cli_args.read_text().replace("'--enforce-eager'", "'--enforce-eager-now'"))
    third = _read(site, cache, builds)
    assert third["origin"] == "installed vllm 9.9.9" and "--enforce-eager-now" in third["options"]  # type: ignore[operator]
    assert builds.read_text().count("built") == 2


def test_an_unwritable_cache_costs_time_not_correctness(tmp_path: Path) -> None:
    site, builds = _fake_vllm(tmp_path / "site"), tmp_path / "builds"
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder should be")
    for _ in range(2):
        assert _read(site, blocked, builds)["origin"] == "installed vllm 9.9.9"
    assert builds.read_text().count("built") == 2
