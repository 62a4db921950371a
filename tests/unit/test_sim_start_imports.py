"""What a `vllm-sim serve` start imports, read from a fresh interpreter's `sys.modules`: the API
server's HTTP side no aiohttp (its import was most of the server's start, docs/decisions/0015), and
the engine core, which spawn starts by running the `vllm-sim` script again as `__mp_main__`,
neither the command line's parser nor psutil."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

NOT_IN_THE_ENGINE = ("vllm_flags.schema", "vllm_sim.serve_args", "psutil")  # the API server's alone


def imported_by(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    argv = [sys.executable, "-c", probe]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", ["vllm_sim.http_app", "vllm_sim.api_server"])
def test_the_simulators_http_side_imports_no_aiohttp(module: str) -> None:
    assert [m for m in imported_by(f"import {module}") if m.split(".")[0] == "aiohttp"] == []


def test_the_console_scripts_module_imports_nothing_until_main_runs() -> None:
    """What the engine core's spawn pays for running the script again: the module, no more."""
    modules = imported_by("import vllm_sim.cli")
    assert [m for m in modules if m.startswith(("vllm_sim.", "vllm_flags"))] == ["vllm_sim.cli"]


def test_the_engine_core_imports_no_command_line_parser_and_no_psutil() -> None:
    modules = imported_by("import vllm_sim.engine_core")
    assert "vllm_sim.config" in modules  # what it unpickles its settings with
    assert [m for m in modules if m in NOT_IN_THE_ENGINE or m.startswith("psutil.")] == []
