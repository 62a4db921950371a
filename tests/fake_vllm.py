"""A stand-in `vllm` package, argparse only, for what the launcher reads from an installed vLLM
(its flag schema, its tool parsers) without the real one (several GB and a GPU). Its parser build
appends a line to the file `$BUILDS` names, so a test can count how often vLLM was "imported"."""

from __future__ import annotations

import os
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
    "tool_parsers/__init__.py": (
        "class ToolParserManager:\n    @staticmethod\n    def list_registered():\n"
        "        return ['mistral', 'hermes', 'qwen3_xml']\n"
    ),
    "entrypoints/openai/cli_args.py": (
        "import os\n"
        "def optional_type(kind):\n"  # as vLLM's engine/arg_utils.py wraps an optional field's type
        "    def _optional_type(value):\n        return None if value in ('', 'None') else kind(value)\n"
        "    return _optional_type\n"
        "def make_arg_parser(parser):\n"
        "    with open(os.environ['BUILDS'], 'a') as f:\n        f.write('built\\n')\n"
        "    parser.add_argument('--max-num-seqs', type=int)\n"
        "    parser.add_argument('--enforce-eager', action='store_true')\n"
        "    parser.add_argument('--enable-auto-tool-choice', action='store_true')\n"
        "    parser.add_argument('--tool-call-parser', type=str)\n"
        "    parser.add_argument('--tool-parser-plugin', type=str)\n"
        # a Literal that also allows str: listed in the metavar only (vllm-facts.md §9.1)
        "    parser.add_argument('--kv-cache-dtype', type=str, metavar=['auto', 'fp8', 'turbo_2bit'])\n"
        "    parser.add_argument('--distributed-executor-backend', type=optional_type(str),\n"
        "                        metavar=['mp', 'ray', 'uni'])\n"
        "    return parser\n"
    ),
}



def make_fake_vllm(root: Path) -> Path:
    """Write the package under `root` (a folder for PYTHONPATH) and return `root`."""
    for name, text in FAKE_VLLM.items():
        path = root / "vllm" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def env_with(site: Path, cache: Path, builds: Path) -> dict[str, str]:
    """An environment in which `launch` finds the fake vLLM and keeps its schema cache in `cache`."""
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{site}", "VLLM_GATE_CACHE": str(cache),
            "BUILDS": str(builds)}  # fmt: skip
