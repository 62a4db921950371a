"""The complexity budget (docs/decisions/0014): no function of the product reaches a cyclomatic
complexity of 20, and fewer than 6 % of them reach 10.

Counted as radon counts it, without radon: 1, plus one per `if`/`elif`, ternary, `assert`, `for`
or `while` (and its `else`), `except` handler (and a `try`'s `else`), `match` case other than the
catch-all, comprehension `for` and each of its `if`s, and each `and`/`or` operand beyond the first.
A nested function or class is a function of its own and adds nothing to its owner; a lambda's
branches are its owner's. Every `def` counts, nested ones included.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache

from tests.conftest import REPO

PACKAGES = ("launcher", "gates", "vllm_flags", "vllm_sim")
CEILING = 20  # no function reaches it
COMPLEX = 10  # the share of functions at or above it stays below HIGH_SHARE
HIGH_SHARE = 0.06
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_OWN_SCOPES = (*_FUNCTIONS, ast.ClassDef)


def _branches(node: ast.AST) -> int:
    if isinstance(node, ast.If | ast.IfExp | ast.Assert):
        return 1
    if isinstance(node, ast.For | ast.AsyncFor | ast.While):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.Try):
        return len(node.handlers) + bool(node.orelse)
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    if isinstance(node, ast.Match):
        catch_all = any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in node.cases)
        return max(0, len(node.cases) - catch_all)
    return 0


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's own cyclomatic complexity: its body, without the functions and classes in it."""
    total, todo = 1, list[ast.AST](function.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _OWN_SCOPES):
            continue
        total += _branches(node)
        if not isinstance(node, ast.Assert):  # radon counts an assert once, whatever it tests
            todo.extend(ast.iter_child_nodes(node))
    return total


def functions_of(source: str) -> Iterator[tuple[str, int, int]]:
    """(name, line, complexity) of every function in `source`, nested ones included."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, _FUNCTIONS):
            yield node.name, node.lineno, complexity(node)


@cache
def product_functions() -> tuple[tuple[str, int], ...]:
    """(`path:line name`, complexity) of every function in the product packages."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO)
            found += [(f"{where}:{line} {name}", cc) for name, line, cc in functions_of(path.read_text())]
    return tuple(found)


def test_no_function_reaches_the_ceiling() -> None:
    over = sorted((cc, where) for where, cc in product_functions() if cc >= CEILING)
    assert not over, f"split these into named steps (docs/decisions/0014): {over}"


def test_fewer_than_six_percent_of_the_functions_are_complex() -> None:
    functions = product_functions()
    complex_ = sorted((cc, where) for where, cc in functions if cc >= COMPLEX)
    assert len(functions) > 1000  # the walk found the product, not an empty tree
    share = len(complex_) / len(functions)
    counted = f"{len(complex_)} of {len(functions)} functions at cyclomatic >= {COMPLEX}"
    assert share < HIGH_SHARE, f"{counted}; the worst: {complex_[-10:]}"


# Shapes with the figure `radon cc` 6.0 gives them (measured once; radon is no dependency).
RADON_SAYS = {
    "def f(x):\n return x": 1,
    "def f(x):\n if x:\n  return 1\n elif x > 2:\n  return 2\n return 3 if x else 4": 4,
    "def f(xs):\n for x in xs:\n  pass\n else:\n  pass\n while xs:\n  break": 4,
    "def f():\n try:\n  pass\n except ValueError:\n  pass\n except KeyError:\n  pass\n else:\n  pass": 4,
    "def f(a, b, c):\n assert a and b\n return a and b and c or not a": 5,  # an assert counts once
    "def f(xs):\n return [x for x in xs if x if x > 1] + [y for ys in xs for y in ys]": 6,
    "def f(x):\n match x:\n  case 1:\n   pass\n  case [y] if y:\n   pass\n  case _:\n   pass": 3,
    "def f(x):\n with x:\n  g = lambda y: y if y else x\n def inner():\n  if x:\n   pass\n"
    " class C:\n  def m(self):\n   return x or 1\n return g": 2,
}


def test_the_count_agrees_with_radon() -> None:
    for source, radon in RADON_SAYS.items():
        assert next(functions_of(source))[2] == radon, source
    nested = {name: cc for name, _, cc in functions_of(list(RADON_SAYS)[-1])}
    assert nested == {"f": 2, "inner": 2, "m": 2}
