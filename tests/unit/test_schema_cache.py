"""The installed vLLM's schema is read from vLLM once, then from the cache until vLLM changes.

The stand-in `vllm` (tests/fake_vllm.py) counts how often its parser is built; each reading runs in a
fresh interpreter, as each `launch` command does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fake_vllm import env_with, make_fake_vllm

READ = (
    "import json; from launcher.profile.schema_source import load_schema; s = load_schema(); "
    "print(json.dumps({'origin': s.origin, 'options': sorted(s.options)}))"
)


def _read(site: Path, cache: Path, builds: Path) -> dict[str, object]:
    env = env_with(site, cache, builds)
    out = subprocess.run([sys.executable, "-c", READ], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_parser_is_built_once_then_read_from_the_cache_until_vllm_changes(tmp_path: Path) -> None:
    site, cache, builds = make_fake_vllm(tmp_path / "site"), tmp_path / "cache", tmp_path / "builds"
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
    site, builds = make_fake_vllm(tmp_path / "site"), tmp_path / "builds"
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder should be")
    for _ in range(2):
        assert _read(site, blocked, builds)["origin"] == "installed vllm 9.9.9"
    assert builds.read_text().count("built") == 2
