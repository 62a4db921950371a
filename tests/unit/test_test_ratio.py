"""scripts/test_ratio.py, the figure of issue 34's point 6: what it counts, and what it leaves out."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_ratio_script", REPO / "scripts" / "test_ratio.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


RATIO = _script()


def write_lines(path: Path, lines: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"x = {k}\n" for k in range(lines)))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    packages = (("launcher", 60), ("gates", 15), ("vllm_flags", 10), ("vllm_sim", 10), ("basis", 5))
    for package, lines in packages:
        write_lines(tmp_path / package / "__init__.py", lines)
    write_lines(tmp_path / "tests" / "unit" / "test_a.py", 30)
    write_lines(tmp_path / "tests" / "integration" / "test_b.py", 15)
    write_lines(tmp_path / "tests" / "helpers.py", 5)
    return tmp_path


def test_every_python_line_counts_blank_and_comment_lines_too(checkout: Path) -> None:
    (checkout / "gates" / "more.py").write_text("# a comment\n\n'''doc'''\n")
    figures = RATIO.count(checkout)
    assert figures.product == {"launcher": 60, "gates": 18, "vllm_flags": 10, "vllm_sim": 10, "basis": 5}
    assert figures.tests == {"unit": 30, "integration": 15, "other": 5}
    assert (figures.product_lines, figures.test_lines, figures.ratio) == (103, 50, round(50 / 103, 3))


def test_caches_data_files_and_links_are_not_code(checkout: Path) -> None:
    write_lines(checkout / "launcher" / "__pycache__" / "stale.py", 500)
    write_lines(checkout / "launcher" / "data" / "catalogue.json", 500)
    outside = checkout.parent / "elsewhere.py"
    write_lines(outside, 500)
    (checkout / "tests" / "unit" / "linked.py").symlink_to(outside)
    figures = RATIO.count(checkout)
    assert figures.product["launcher"] == 60 and figures.tests["unit"] == 30


def test_the_command_prints_the_table_or_json_and_refuses_a_tree_that_is_not_a_checkout(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert RATIO.main([str(checkout)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["launcher", "60"] and table[-1].split() == ["tests", "÷", "code", "0.5"]
    assert RATIO.main([str(checkout), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ratio"] == 0.5
    (checkout / "vllm_sim" / "__init__.py").unlink()
    (checkout / "vllm_sim").rmdir()
    assert RATIO.main([str(checkout)]) == 2
    assert "is not a vllm-gate checkout" in capsys.readouterr().err


def test_this_repository_counts_the_packages_the_issue_names() -> None:
    figures = RATIO.count(REPO)
    assert set(figures.product) == {"launcher", "gates", "vllm_flags", "vllm_sim", "basis"}
    assert figures.tests["unit"] > 0 and figures.tests["integration"] > 0 and figures.ratio is not None
