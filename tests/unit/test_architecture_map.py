"""docs/architecture.md is a map of the tree that stays true: every module of every product package
is named in its package's section, every name there is a module (or a folder) that exists, and the
top-level folders have their line. vllm_sim's one line per module lives in docs/simulator.md, which
is held the same way.

The map's grammar: a section `## PATH/ — words` per package, then items `- NAMES — what they do`,
NAMES being backticked module names (`attempt`, `__main__`) or folders (`data/`), comma-separated.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

MAP = REPO / "docs" / "architecture.md"
SIMULATOR_DOC = REPO / "docs" / "simulator.md"
PACKAGES = ("basis", "gates", "vllm_flags", "launcher", "vllm_sim")
TOP_LEVEL = ("bench", "scripts", "fleet", "systemd", "profiles", "tests", "docs")
REST = "The rest of the tree"
SECTION = re.compile(r"^## (?P<title>.+?)\s*$")
ITEM = re.compile(r"^- (?P<names>`[^`]+`(?:, `[^`]+`)*) — ")
NAME = re.compile(r"`([^`]+)`")


def sections(text: str) -> dict[str, list[list[str]]]:
    """Section title → the NAMES of each of its items, in order."""
    found: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        heading = SECTION.match(line)
        if heading:
            current = found.setdefault(heading["title"], [])
        elif current is not None and (item := ITEM.match(line)):
            current.append(NAME.findall(item["names"]))
    return found


def package_of(title: str) -> str | None:
    """`launcher/supervisor/ — one launcher's life` → `launcher/supervisor`; None for other sections."""
    path = title.split(" ", 1)[0]
    return path.rstrip("/") if path.endswith("/") else None


def modules_in(folder: Path) -> set[str]:
    return {path.stem for path in folder.glob("*.py")} - {"__init__"}


def package_folders() -> set[str]:
    """Every folder of a product package that holds a module besides `__init__`."""
    folders = set()
    for package in PACKAGES:
        for init in (REPO / package).rglob("__init__.py"):
            if "__pycache__" not in init.parts and modules_in(init.parent):
                folders.add(init.parent.relative_to(REPO).as_posix())
    return folders


def mapped() -> dict[str, list[str]]:
    """Package folder → every name its section gives."""
    return {
        package: [name for names in items for name in names]
        for title, items in sections(MAP.read_text(encoding="utf-8")).items()
        if (package := package_of(title)) is not None
    }


def test_every_package_folder_has_its_section() -> None:
    assert set(mapped()) == package_folders()


def test_every_module_is_named_once_in_its_package_section() -> None:
    missing, unknown, twice = [], [], []
    for package, names in mapped().items():
        folder = REPO / package
        modules = [name for name in names if not name.endswith("/")]
        missing += [f"{package}/{m}" for m in sorted(modules_in(folder) - set(modules))]
        unknown += [f"{package}/{m}" for m in modules if m not in modules_in(folder)]
        unknown += [f"{package}/{d}" for d in names if d.endswith("/") and not (folder / d).is_dir()]
        twice += [f"{package}/{m}" for m in set(modules) if modules.count(m) > 1]
    assert (missing, unknown, twice) == ([], [], [])


def test_the_top_level_folders_have_their_line() -> None:
    rest = [name for names in sections(MAP.read_text(encoding="utf-8"))[REST] for name in names]
    assert sorted(name.rstrip("/") for name in rest) == sorted(TOP_LEVEL)
    assert all((REPO / name).is_dir() for name in rest)


def test_the_simulator_doc_has_one_line_per_module() -> None:
    listed = re.findall(r"^- `([a-z_0-9]+)\.py`:", SIMULATOR_DOC.read_text(encoding="utf-8"), re.MULTILINE)
    assert sorted(listed) == sorted(modules_in(REPO / "vllm_sim"))


def test_the_map_stays_short_enough_to_read() -> None:
    # One line per module is the floor; everything else lives in the packages' docstrings.
    modules = sum(len(modules_in(REPO / folder)) for folder in package_folders())
    assert len(MAP.read_text(encoding="utf-8").splitlines()) <= modules + 60


def test_the_grammar_reads_a_section_its_items_and_folders() -> None:
    text = "## gates/ — the chain\n- `chain` — runs\n- `a`, `b` — two\nprose `x`\n## Other\n- `c` — no\n"
    assert sections(text) == {"gates/ — the chain": [["chain"], ["a", "b"]], "Other": [["c"]]}
    assert package_of("gates/ — the chain") == "gates" and package_of("Other") is None
