"""Every vLLM fact a comment relies on is in the repository: docs/vllm-facts.md, by stable number."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

DOC = REPO / "docs" / "vllm-facts.md"
CITING_DIRS = ("basis", "launcher", "gates", "vllm_flags", "vllm_sim", "scripts", "tests", "docs")
SUFFIXES = {".py", ".sh", ".md", ".txt", ".toml"}
CITATION = re.compile(r"vllm-facts(?:\.md)?`? ?(§[^)\n]*)")
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")
ROWS = re.compile(r"§2 (?:rows? |#)(\d+)(?:[–-](\d+))?")
# Spelled in two parts so that this file does not match its own pattern.
OUTSIDE_FILE = re.compile("FACTS" + r"(?:\.md)? ?§|" + "FACTS" + r"\.md")


def cited_files() -> list[Path]:
    return [
        path
        for folder in CITING_DIRS
        for path in sorted((REPO / folder).rglob("*"))
        if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts
    ]


def doc_sections() -> set[str]:
    return set(re.findall(r"^#{2,3} §(\d+(?:\.\d+)?) ", DOC.read_text(encoding="utf-8"), re.MULTILINE))


def doc_startup_rows() -> set[int]:
    text = DOC.read_text(encoding="utf-8").split("## §2 ", 1)[1].split("\n## ", 1)[0]
    return {int(n) for n in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)}


def citations() -> list[tuple[Path, str]]:
    found = []
    for path in cited_files():
        for match in CITATION.finditer(path.read_text(encoding="utf-8", errors="replace")):
            found.append((path.relative_to(REPO), match.group(1)))
    return found


def test_every_cited_section_exists_in_the_doc() -> None:
    sections, rows, cited = doc_sections(), doc_startup_rows(), citations()
    assert len(cited) >= 60  # the comments do point here (66 cited the outside file before)
    missing = [
        (str(path), span)
        for path, span in cited
        if any(number not in sections for number in SECTION.findall(span))
    ]
    assert not missing, missing
    missing_rows = [
        (str(path), span)
        for path, span in cited
        for first, last in ROWS.findall(span)
        if not {int(first), int(last or first)} <= rows
    ]
    assert not missing_rows, missing_rows


def test_the_doc_numbers_every_section_it_promises() -> None:
    sections = doc_sections()
    assert {str(n) for n in range(12)} <= sections
    assert {"3.1", "3.3", "3.4", "3.6", "3.7", "5.1", "5.2", "5.4", "5.5", "5.6"} <= sections
    assert doc_startup_rows() == set(range(1, 27))


def test_no_file_cites_the_reference_outside_the_repository() -> None:
    paths = cited_files() + sorted((REPO / "docs").rglob("*.md"))
    offenders = [
        str(path.relative_to(REPO))
        for path in paths
        if OUTSIDE_FILE.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not offenders, offenders


def test_the_doc_is_linked_from_the_documentation_lists() -> None:
    for page in ("README.md", "docs/architecture.md"):
        assert "docs/vllm-facts.md" in (REPO / page).read_text(encoding="utf-8"), page
