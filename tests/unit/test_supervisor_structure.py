"""launcher/supervisor/ stays consolidated: fewer than 31 modules, none over 350 lines, no class
assembled from mixins, collaborators over one serving state that import each other in one order,
and one seam module whose Protocols know no implementer.

`seams.py` declares what crosses between the serve loop and what it drives (the engine, its judge,
vLLM's sleep routes, the host hooks, systemd). A seam that imports its implementer is a cycle in
disguise: changing the engine then means changing the seam. Imports are read with `ast` over each
file, those under `if TYPE_CHECKING:` and inside functions included (as tests/unit/test_layering.py
reads them).
"""

from __future__ import annotations

import ast
from functools import cache

from tests.conftest import REPO

SUPERVISOR = REPO / "launcher" / "supervisor"
PACKAGE = "launcher.supervisor"
SEAM = "seams"
MOST_MODULES = 30  # issue 34: fewer than 31, after the serving watch and park landed
# The modules that implement the seam's Protocols (or plug the real ones in): the seam names none.
IMPLEMENTERS = frozenset(
    {"engine", "group_watch", "attempt", "livelog", "sleep", "park", "wiring", "service"}
)
LARGEST_MODULE_LINES = 350
# The collaborators over the serving state, each allowed to import only those before it.
COLLABORATORS = (
    "state",
    "context",
    "stage",
    "park",
    "bringup",
    "beside",
    "recovery",
    "lending",
    "reload",
    "service",
)


def _modules() -> list[str]:
    return sorted(path.stem for path in SUPERVISOR.glob("*.py"))


def _supervisor_imports(tree: ast.AST) -> set[str]:
    """The launcher.supervisor modules a file imports, by short name (`from launcher.supervisor
    import reload_requests` included)."""
    found = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == PACKAGE:
                names = [f"{PACKAGE}.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        found |= {name.split(".")[2] for name in names if name.startswith(PACKAGE + ".")}
    return found


@cache
def _imports_of(module: str) -> frozenset[str]:
    path = SUPERVISOR / f"{module}.py"
    return frozenset(_supervisor_imports(ast.parse(path.read_text(encoding="utf-8"))))


def _reached_from(module: str) -> set[str]:
    """Every launcher.supervisor module `module` imports, directly or through another."""
    seen: set[str] = set()
    todo = list(_imports_of(module))
    while todo:
        name = todo.pop()
        if name not in seen and (SUPERVISOR / f"{name}.py").is_file():
            seen.add(name)
            todo.extend(_imports_of(name))
    return seen


def test_the_supervisor_has_fewer_than_31_modules() -> None:
    modules = _modules()
    assert len(modules) <= MOST_MODULES, f"{len(modules)} modules: merge by responsibility, {modules}"


def test_there_is_one_seam_module_and_the_old_seams_are_gone() -> None:
    modules = set(_modules())
    assert SEAM in modules
    assert not modules & {"engine_port", "execute", "notify_port", "hooks"}, "fold seams into seams.py"


def test_the_seam_imports_no_module_that_implements_it() -> None:
    reached = _reached_from(SEAM)
    assert not reached & IMPLEMENTERS, f"seams.py reaches {sorted(reached & IMPLEMENTERS)}"


def test_no_module_the_seam_imports_imports_the_seam_back() -> None:
    back = sorted(name for name in _reached_from(SEAM) if SEAM in _imports_of(name))
    assert back == [], f"a cycle through seams.py: {back}"


def test_the_implementers_take_their_types_from_the_seam() -> None:
    # engine.py reports a Death and a StopReport, attempt.py builds the Attempt the judge takes,
    # wiring.py plugs real ones into Execute: each names the seam, so the seam is what they share.
    assert {name for name in ("engine", "group_watch", "attempt", "wiring") if SEAM in _imports_of(name)} == {
        "engine",
        "group_watch",
        "attempt",
        "wiring",
    }


def test_the_scan_sees_type_checking_imports_and_the_package_form() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from launcher.supervisor import reload_requests\n"
        "if TYPE_CHECKING:\n"
        "    from launcher.supervisor.attempt import Attempt\n"
        "def f():\n"
        "    import launcher.supervisor.engine\n"
        "from launcher.watch.verdict import Judgement\n"
    )
    assert _supervisor_imports(tree) == {"reload_requests", "attempt", "engine"}


def test_no_module_is_over_350_lines() -> None:
    sizes = {m: len((SUPERVISOR / f"{m}.py").read_text(encoding="utf-8").splitlines()) for m in _modules()}
    over = {m: n for m, n in sizes.items() if n > LARGEST_MODULE_LINES}
    assert not over, f"split by responsibility: {over}"


def test_no_class_is_assembled_from_mixins_or_stubs_its_siblings() -> None:
    for module in _modules():
        tree = ast.parse((SUPERVISOR / f"{module}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                plain = [b for b in bases if b not in ("Protocol", "Exception", "StrEnum")]
                assert len(plain) <= 1, f"{module}.{node.name} is assembled from {bases}: pass collaborators"
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                defs = [n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef)]
                assert not defs, f"{module} stubs {defs} under TYPE_CHECKING: a sibling's method, by hand"


def test_the_collaborators_import_each_other_in_one_order() -> None:
    for index, module in enumerate(COLLABORATORS):
        later = set(COLLABORATORS[index + 1 :])
        assert not _imports_of(module) & later, f"{module} imports {sorted(_imports_of(module) & later)}"


def test_only_the_serving_state_holds_what_serves() -> None:
    # `serving`, `parked`, `trial`, `lent_to` are the state's: no collaborator keeps a copy of its own.
    owned = ("serving", "parked", "trial", "lent_to", "current")
    for module in COLLABORATORS[1:]:
        tree = ast.parse((SUPERVISOR / f"{module}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                assert node.attr not in owned, f"{module} sets self.{node.attr}: change the state instead"
