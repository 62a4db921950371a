"""No module of the product imports itself back through others, and no folder does.

A circle of imports means none of its members can be read, tested or changed alone: a change to
one is a change to all. Two graphs are checked over basis/, launcher/, gates/, vllm_flags/ and
vllm_sim/:

- modules: `a.py` → `b.py` when a imports b;
- folders (packages): `launcher/supervisor/` → `launcher/watch/` when a module of the one imports a
  module of the other. A folder and its own sub-folders are one family, not two ends of an edge:
  launcher/state/ uses launcher/errors.py and launcher/cli.py assembles launcher/commands/, and
  neither is a circle of packages. The layering between the five top-level packages is
  tests/unit/test_layering.py's.

Imports are read with `ast` over each whole file, as tests/unit/test_layering.py and
tests/unit/test_supervisor_structure.py read them: those inside functions and under
`if TYPE_CHECKING:` count (a circle hidden in a function import is still a circle), `from pkg import
module` names the module, relative imports are resolved, and a package named as a string to
`importlib.import_module` or `importlib.resources.files` counts as an import of it.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from functools import cache
from pathlib import PurePosixPath

from tests.conftest import REPO

PACKAGES = ("basis", "launcher", "gates", "vllm_flags", "vllm_sim")
MOST_CYCLES = 50  # per graph: enough to read, and the enumeration stays bounded in a big tangle
_BY_NAME = ("files", "import_module")  # importlib.resources.files("pkg"), importlib.import_module("pkg")

Graph = Mapping[str, Collection[str]]
Witnesses = Mapping[tuple[str, str], str]  # (from, to) -> "file:line imports file" that makes the edge
Edges = tuple[dict[str, set[str]], dict[tuple[str, str], str]]  # a graph and its witnesses


# ---- reading the imports ---------------------------------------------------------------------------
def imported_names(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of each import in the tree, relative ones resolved against `package`.

    `from a.b import c` yields `a.b.c`: whether `c` is a module or a name in a.b is decided by
    `module_of`, which keeps the longest prefix that is a module of ours."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _BY_NAME and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _absolute(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    parts = parts[: len(parts) - level + 1]  # `.` is the package itself, `..` its parent
    return ".".join(parts + ([module] if module else []))


@cache
def product_modules() -> dict[str, str]:
    """Dotted name -> file (relative to the repository, `/`-separated) of every product module."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            file = path.relative_to(REPO).as_posix()
            parts = PurePosixPath(file).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return found


def module_of(name: str, modules: Mapping[str, str]) -> str | None:
    """The file of the longest prefix of `name` that is a module of ours, else None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return modules.get(name)


def _package_of(file: str) -> str:
    parts = PurePosixPath(file).with_suffix("").parts
    return ".".join(parts if parts[-1] == "__init__" else parts[:-1])


@cache
def module_graph() -> Edges:
    """file -> the files it imports, and for each edge the first import that makes it."""
    modules = product_modules()
    graph: dict[str, set[str]] = {file: set() for file in modules.values()}
    witnesses: dict[tuple[str, str], str] = {}
    for file in graph:
        tree = ast.parse((REPO / file).read_text(encoding="utf-8"))
        for line, name in imported_names(tree, _package_of(file)):
            target = module_of(name, modules)
            if target is not None and target != file:
                graph[file].add(target)
                witnesses.setdefault((file, target), f"{file}:{line} imports {target}")
    return graph, witnesses


def folder_of(file: str) -> str:
    return f"{PurePosixPath(file).parent.as_posix()}/"


def folder_graph(modules: Graph, witnesses: Witnesses) -> Edges:
    """folder -> the folders its modules import, leaving out a folder's own sub-folders and parents."""
    graph: dict[str, set[str]] = {folder_of(file): set() for file in modules}
    folder_witnesses: dict[tuple[str, str], str] = {}
    for (source, target), where in sorted(witnesses.items()):
        a, b = folder_of(source), folder_of(target)
        if a.startswith(b) or b.startswith(a):
            continue  # the same folder, or one holds the other: one family
        graph[a].add(b)
        folder_witnesses.setdefault((a, b), where)
    return graph, folder_witnesses


# ---- finding the circles -------------------------------------------------------------------------
def find_cycles(graph: Graph) -> list[tuple[str, ...]]:
    """Every elementary cycle of the graph (at most MOST_CYCLES), each beginning at its least node."""
    reach = {node: _reached(graph, node) for node in graph}
    found: list[tuple[str, ...]] = []
    for start in sorted(graph):
        # the nodes of start's strongly connected component from start on: a cycle is found once,
        # from its least node
        tangle = {node for node in reach[start] if node >= start and start in reach[node]}
        found += _cycles_through(graph, start, tangle, MOST_CYCLES - len(found))
    return found


def _reached(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def _cycles_through(graph: Graph, start: str, tangle: set[str], most: int) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    todo: list[tuple[str, ...]] = [(start,)]
    while todo and len(found) < most:
        path = todo.pop()
        for node in sorted(graph.get(path[-1], ()), reverse=True):
            if node == start:
                found.append(path)
            elif node in tangle and node not in path:
                todo.append((*path, node))
    return sorted(found[:most])


def chain(cycle: tuple[str, ...]) -> str:
    return " -> ".join((*cycle, cycle[0]))


def _explained(cycle: tuple[str, ...], witnesses: Witnesses) -> str:
    edges = zip(cycle, (*cycle[1:], cycle[0]), strict=True)
    return chain(cycle) + "".join(f"\n    {witnesses[edge]}" for edge in edges)


def _circles(graph: Graph, witnesses: Witnesses) -> dict[str, str]:
    """chain -> the chain with the import behind each of its edges."""
    return {chain(cycle): _explained(cycle, witnesses) for cycle in find_cycles(graph)}


def module_circles() -> dict[str, str]:
    return _circles(*module_graph())


def folder_circles() -> dict[str, str]:
    return _circles(*folder_graph(*module_graph()))


def _report(circles: Mapping[str, str]) -> str:
    return "\n".join(circles[key] for key in sorted(circles))


# ---- the tree has none ---------------------------------------------------------------------------
def test_no_module_imports_itself_back_through_others() -> None:
    found = module_circles()
    assert not found, (
        f"import circles between modules (move the shared piece to its owner):\n{_report(found)}"
    )


def test_no_folder_imports_itself_back_through_others() -> None:
    found = folder_circles()
    assert not found, f"import circles between folders:\n{_report(found)}"


# ---- the scan and the finder see what they must ----------------------------------------------------
def test_the_scan_sees_the_tree() -> None:
    """A scan that read nothing would find no circle: it finds the imports it must."""
    graph, _ = module_graph()
    assert "launcher/logfacts/handlers.py" in graph["launcher/logfacts/collector.py"]
    assert "vllm_sim/engine_loop.py" in graph["vllm_sim/engine_core.py"]
    assert "gates/registry.py" in graph["launcher/check.py"]
    folders, _ = folder_graph(*module_graph())
    assert folders["launcher/"] >= {"gates/", "basis/"}
    assert "launcher/" not in folders["launcher/state/"], "a folder and its sub-folder make no edge"


def test_the_scan_reads_every_form_of_import() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from launcher.logfacts import patterns\n"
        "from .live_reload import reload_if_running\n"
        "from . import profile_arg\n"
        "from ..state import store\n"
        "if TYPE_CHECKING:\n"
        "    from launcher.logfacts.collector import Collector\n"
        "def f():\n"
        "    import vllm_sim.engine_core\n"
        "    return importlib.import_module('vllm_flags.schema')\n"
    )
    assert {name for _, name in imported_names(tree, "launcher.commands")} == {
        "typing.TYPE_CHECKING",
        "launcher.logfacts.patterns",
        "launcher.commands.live_reload.reload_if_running",
        "launcher.commands.profile_arg",
        "launcher.state.store",
        "launcher.logfacts.collector.Collector",
        "vllm_sim.engine_core",
        "vllm_flags.schema",
    }


def test_a_name_resolves_to_the_module_that_holds_it() -> None:
    modules = product_modules()
    assert module_of("launcher.logfacts.collector.Collector", modules) == "launcher/logfacts/collector.py"
    assert module_of("launcher.logfacts.patterns", modules) == "launcher/logfacts/patterns.py"
    assert module_of("launcher.logfacts", modules) == "launcher/logfacts/__init__.py"
    assert module_of("typing.TYPE_CHECKING", modules) is None


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "x": {"y"}, "y": {"x"}}
    assert find_cycles(graph) == [("a", "b", "c"), ("x", "y")]
    assert chain(("a", "b", "c")) == "a -> b -> c -> a"


def test_the_cycle_finder_finds_each_circle_of_a_tangle_once() -> None:
    graph = {"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a"}}
    assert find_cycles(graph) == [("a", "b"), ("a", "b", "c"), ("a", "c")]


def test_the_cycle_finder_finds_none_in_a_diamond() -> None:
    graph = {"top": {"left", "right"}, "left": {"bottom"}, "right": {"bottom"}, "bottom": set()}
    assert find_cycles(graph) == []
