"""Each gate declares what it needs (`NEEDS`), and whatever asks where a gate may run reads that one
declaration through `gates.registry.http_only`: `launch check`, the generated docs, a woken engine's
re-gate. Adding a gate is its module, its registry line, its test and the regenerated docs table;
no list of gate names elsewhere has to learn about it."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from gates.base import GateBase, Need
from gates.reference import reference_markdown
from gates.registry import GATES, HTTP_ONLY, http_only
from launcher.check import parse_gate_names
from launcher.errors import BadInput
from tests.conftest import REPO

# what reading each field of the GateContext means; the clock and the expectations every gate has
READS = {"http": Need.HTTP, "log": Need.LOG, "server": Need.PROCESSES, "memory": Need.PROCESSES}


def _context_fields_read(tree: ast.AST) -> set[Need]:
    """The needs behind each `ctx.X` (or `self.ctx.X`) a gate's module reads."""
    return {
        READS[node.attr]
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in READS
        and (getattr(node.value, "id", None) == "ctx" or getattr(node.value, "attr", None) == "ctx")
    }


def test_every_registered_gate_declares_what_it_needs() -> None:
    for name, cls in GATES.items():
        assert "NEEDS" in vars(cls), f"{name}: declare NEEDS on the gate class (gates/base.py Need)"
        assert cls.NEEDS and all(isinstance(need, Need) for need in cls.NEEDS), name


def test_a_gate_declares_what_its_module_reads_of_the_context() -> None:
    """The declaration is what the code does: a gate that starts reading the log while it declares
    only HTTP would wait for facts `launch check` never has. (Load cannot be read from the code: the
    leak gate's traffic is the one that declares it.)"""
    for name, cls in GATES.items():
        tree = ast.parse(Path(inspect.getfile(cls)).read_text(encoding="utf-8"))
        assert _context_fields_read(tree) == cls.NEEDS - {Need.LOAD}, name


def test_the_context_scan_sees_each_field_however_it_is_reached() -> None:
    tree = ast.parse(
        "ctx.http.get('/health', 1)\nself.ctx.memory.rss_bytes(self.ctx.server.process_tree())\n"
    )
    assert _context_fields_read(tree) == {Need.HTTP, Need.PROCESSES}
    assert _context_fields_read(ast.parse("ctx.clock.sleep(1)\nctx.expect.max_model_len\n")) == set()


def test_every_gate_class_in_gates_is_registered() -> None:
    defined = set()
    for path in sorted((REPO / "gates").glob("*.py")):
        module = importlib.import_module(f"gates.{path.stem}")
        defined |= {
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, GateBase) and obj is not GateBase
            if obj.__module__ == module.__name__
        }
    assert defined == set(GATES.values()), "give the new gate its line in gates/registry.py GATES"


def test_http_only_keeps_the_gates_that_need_nothing_but_http_in_the_order_given() -> None:
    assert http_only(GATES) == ("health", "tool_call", "smoke", "canary")
    assert http_only(["canary", "kernel_marker", "health", "memory_leak", "graph_capture"]) == (
        "canary",
        "health",
    )
    assert http_only([]) == ()
    assert frozenset(http_only(GATES)) == HTTP_ONLY


def test_launch_check_offers_exactly_the_http_only_gates_and_says_what_the_others_need() -> None:
    for name, cls in GATES.items():
        if name in HTTP_ONLY:
            assert parse_gate_names(name) == (name,)
            continue
        with pytest.raises(BadInput) as refused:
            parse_gate_names(name)
        for need in cls.NEEDS - {Need.HTTP}:
            assert need.meaning in str(refused.value), (name, need)


def test_the_generated_docs_name_every_gates_needs_and_every_need() -> None:
    doc = reference_markdown()  # tests/unit/test_docs_sync.py keeps docs/gates.md carrying it
    for name, cls in GATES.items():
        needs = ", ".join(f"`{need}`" for need in Need if need in cls.NEEDS)
        where = "any running server" if name in HTTP_ONLY else "a start's chain |"
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{name}` | ")), "")
        assert row.startswith(f"| `{name}` | {needs} | ") and where in row, (name, row)
    for need in Need:
        assert f"| `{need}` | {need.meaning} |" in doc
