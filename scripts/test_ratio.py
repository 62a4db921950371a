"""Tests ÷ code, counted as issue 34 counts it: every line of the Python files under tests/ over every
line of the product packages (launcher, gates, vllm_flags, vllm_sim, basis), blank lines and comments
included, caches and data files not.

    python3 scripts/test_ratio.py [ROOT] [--json]

Prints each package's lines, the tests split into unit, integration and the rest (helpers, GPU
tests), and the ratio. Reads files only, follows no link; `ROOT` defaults to the repository this
script is in.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

PRODUCT = ("launcher", "gates", "vllm_flags", "vllm_sim", "basis")
TESTS = "tests"
TEST_PARTS = ("unit", "integration")


@dataclass(frozen=True, slots=True)
class Count:
    product: dict[str, int]  # package -> lines
    tests: dict[str, int]  # unit, integration, other -> lines

    @property
    def product_lines(self) -> int:
        return sum(self.product.values())

    @property
    def test_lines(self) -> int:
        return sum(self.tests.values())

    @property
    def ratio(self) -> float | None:
        return round(self.test_lines / self.product_lines, 3) if self.product_lines else None

    def as_json(self) -> dict[str, object]:
        return {
            "product": self.product,
            "product_lines": self.product_lines,
            "tests": self.tests,
            "test_lines": self.test_lines,
            "ratio": self.ratio,
        }

    def render(self) -> str:
        rows = [*self.product.items(), ("product", self.product_lines)]
        rows += [(f"tests/{name}", lines) for name, lines in self.tests.items()]
        rows += [("tests", self.test_lines)]
        table = [f"{label:18} {lines:7}" for label, lines in rows]
        return "\n".join([*table, f"{'tests ÷ code':18} {self.ratio}"])


def python_lines(root: Path) -> int:
    """Lines of every `*.py` under root, outside `__pycache__`; links and unreadable files count 0."""
    total = 0
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts or path.is_symlink() or not path.is_file():
            continue
        try:
            with path.open("rb") as source:
                total += sum(1 for _ in source)
        except OSError:
            continue
    return total


def count(root: Path) -> Count:
    tests_root = root / TESTS
    parts = {name: python_lines(tests_root / name) for name in TEST_PARTS}
    parts["other"] = python_lines(tests_root) - sum(parts.values())
    return Count({name: python_lines(root / name) for name in PRODUCT}, parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not all((args.root / name).is_dir() for name in (*PRODUCT, TESTS)):
        print(
            f"error: {args.root} is not a vllm-gate checkout (needs {', '.join(PRODUCT)}, tests/)",
            file=sys.stderr,
        )
        return 2
    figures = count(args.root)
    print(json.dumps(figures.as_json(), indent=2) if args.json else figures.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
