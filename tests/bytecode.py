"""pytest plugin: the suite keeps compiled bytecode even where the host says not to write it.

A host that sets `PYTHONDONTWRITEBYTECODE=1` (this project's CI machines do) makes every one of the
xdist workers rewrite and compile every test module, and every `launch`, `vllm-sim` and engine
process the tests start compile the product modules again: about a fifth of the suite's CPU
(docs/decisions/0010). The suite writes the caches Python would write by default — `__pycache__/`
beside the sources of this checkout, ignored by git — and nothing anywhere else:

- this process and the workers it starts write what they import and rewrite (pytest's assertion
  rewriting honours `sys.dont_write_bytecode`);
- before any worker starts, the main process compiles the product packages the tests' child
  processes import, so those read a cache from their first start on. Children still inherit the
  host's setting: they read caches, they never write them.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("basis", "launcher", "gates", "vllm_flags", "vllm_sim", "bench", "fleet")

sys.dont_write_bytecode = False  # before pytest imports (and rewrites) the first test module


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # the main process compiled before it started this worker
    for package in PRODUCT:
        if (REPO / package).is_dir():
            compileall.compile_dir(REPO / package, quiet=2)
