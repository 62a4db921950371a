"""The product's packages import each other in one direction only, so none can be changed in a cycle.

`gates/` never imports `launcher/`: gates declare the interfaces they need, the launcher supplies
them. `basis/` (the clock, a declared setting, the simulated GPU set) is a leaf that gates/ and launcher/
both import, and the simulator too (it writes the simulated GPU set the launcher reads).
`vllm_flags/` (vLLM's flag schema, the capture-size rule, the simulator's flags) is a leaf
that all three may import. `vllm_sim/` is a separate program: the launcher knows it only as a
command to run, and it knows nothing of the launcher or the gates.

Imports are read with `ast` over the whole tree, those inside functions included; a package named
as a string to `importlib.resources.files` or `importlib.import_module` counts as an import too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.conftest import REPO

# package -> the other packages of ours it may import
ALLOWED: dict[str, frozenset[str]] = {
    "basis": frozenset(),
    "vllm_flags": frozenset(),
    "gates": frozenset({"basis", "vllm_flags"}),
    "vllm_sim": frozenset({"basis", "vllm_flags"}),
    "launcher": frozenset({"basis", "gates", "vllm_flags"}),
}
_BY_NAME = ("files", "import_module")  # importlib.resources.files("pkg"), importlib.import_module("pkg")


def _imported_names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of each absolute import and each package named to `files`/`import_module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _BY_NAME and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _product_packages() -> set[str]:
    return {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests"}


@cache
def _imports_of_ours(package: str) -> tuple[tuple[Path, int, str], ...]:
    """(file, line, top-level package) for each import of another package of ours by `package`."""
    ours = _product_packages()
    found = []
    for path in sorted((REPO / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in _imported_names(tree):
            top = name.split(".")[0]
            if top in ours and top != package:
                found.append((path.relative_to(REPO), line, top))
    return tuple(found)


def _graph() -> dict[str, set[str]]:
    return {package: {top for _, _, top in _imports_of_ours(package)} for package in _product_packages()}


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


def test_every_product_package_has_a_place_in_the_layering() -> None:
    assert _product_packages() == set(ALLOWED), "give the new top-level package its row in ALLOWED"


def test_each_package_imports_only_the_packages_its_layer_allows() -> None:
    offenders = [
        f"{path}:{line}: {package} imports {top}"
        for package, allowed in ALLOWED.items()
        for path, line, top in _imports_of_ours(package)
        if top not in allowed
    ]
    assert offenders == []


def test_the_package_graph_has_no_cycle() -> None:
    graph = _graph()
    assert graph["launcher"] >= {"basis", "gates", "vllm_flags"}, "the scan found the launcher's imports"
    remaining = {package: set(deps) for package, deps in graph.items()}
    while remaining:
        leaves = {package for package, deps in remaining.items() if not deps}
        assert leaves, f"a cycle among {sorted(remaining)}: {remaining}"
        remaining = {package: deps - leaves for package, deps in remaining.items() if package not in leaves}


def test_the_scan_sees_imports_inside_functions_and_packages_named_as_strings() -> None:
    tree = ast.parse(
        "def f():\n"
        "    from vllm_sim.cli import main\n"
        "    import gates.chain\n"
        "    return resources.files('launcher').joinpath('data'), importlib.import_module('vllm_flags')\n"
    )
    assert sorted(name for _, name in _imported_names(tree)) == [
        "gates.chain",
        "launcher",
        "vllm_flags",
        "vllm_sim.cli",
    ]
