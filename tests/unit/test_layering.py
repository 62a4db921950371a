"""`gates/` never imports `launcher/`: gates declare the interfaces they need, the launcher supplies them."""

from __future__ import annotations

import ast

from tests.conftest import REPO


def test_gates_never_import_launcher() -> None:
    offenders = []
    for path in sorted((REPO / "gates").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n == "launcher" or n.startswith("launcher.")]
    assert offenders == []
