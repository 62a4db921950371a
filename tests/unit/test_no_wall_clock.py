"""The rule of docs/decisions/0013, enforced: no test judges the wall clock.

A test asserts what was measured, flagged, refused or restarted; that something took less than N
seconds, or that two timings are close, is a figure for bench/ (bench/bench_figures.py), because a
busy host moves it. What this finds, in the `assert` statements of every module under tests/:

- a bound on the real clock: a comparison with a number (not 0), or a `pytest.approx` with a
  tolerance, of an expression that reads `time.monotonic()`, `time.time()`, `time.perf_counter()`
  (or their `_ns` forms), `time.process_time()` or `datetime.now()` — directly or through local
  names assigned from one (`sent = time.monotonic()` ... `assert time.monotonic() - sent < 20`);
- in tests/integration/ (real processes, real time), the same of a measured time or rate read
  from a result: a key or attribute named like one (`…_s`, `…_ms`, `…tok_s`, `…_mono`, `…_wall`,
  `chk`, `lag`, `seconds`, `elapsed`, `took`, `duration`): `assert 120 < entry["decode_tok_s"] < 180`.

What it lets through, on purpose: comparisons with 0 (a time was measured), orderings of two
stamps without a number (the sim wrote a token before the client read it), `pytest.approx` without
a tolerance (a formula: chk = decode x c / throughput), and anything on a fake clock. Deadlines that
wait on an event are not asserts; that they are generous is the reviewer's to hold (the decision).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from tests.conftest import REPO

TESTS = REPO / "tests"
CLOCK_FUNCTIONS = {
    "time": {
        "monotonic",
        "monotonic_ns",
        "time",
        "time_ns",
        "perf_counter",
        "perf_counter_ns",
        "process_time",
    },
    "datetime": {"now", "utcnow"},
}
TIMED_NAME = re.compile(
    r"(_s|_ms|tok_s|_mono|_wall|_times)$|^(chk|lag|lags|gap|gaps|seconds|elapsed|took|duration)$"
)


def is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    owner = node.func.value
    owner_name = (
        owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    )
    return node.func.attr in CLOCK_FUNCTIONS.get(owner_name, set())


def reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    return any(is_clock_call(n) or (isinstance(n, ast.Name) and n.id in tainted) for n in value_nodes(node))


def value_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk over what an expression's value is made of: not into `len(...)` (a count of stamps
    is not a time), a call's function name, its keyword arguments (`key=`, `timeout_s=`) or a lambda."""
    yield node
    if isinstance(node, ast.Lambda | ast.keyword):
        return
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "len":
            return
        children: list[ast.AST] = list(node.args)
        if isinstance(node.func, ast.Attribute):
            children.append(node.func.value)  # `record.itl()`: the record is read, `itl` is a name
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from value_nodes(child)


def reads_timed_result(node: ast.AST) -> bool:
    """A measured time or rate, by its name: a key, an attribute or a local."""
    for n in value_nodes(node):
        key = n.slice.value if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) else None
        name = key if isinstance(key, str) else n.attr if isinstance(n, ast.Attribute) else None
        name = n.id if isinstance(n, ast.Name) else name
        if name is not None and TIMED_NAME.search(name):
            return True
    return False


def bound_from(node: ast.AST, timed: Callable[[ast.AST], bool]) -> set[str]:
    """The names `node` binds from a timed value: an assignment, a for loop's target, or a list
    filled with `.append()`/`.extend()`."""
    value: ast.AST | None = None
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        value, targets = node.value, list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
        value, targets = node.value, [node.target]
    elif isinstance(node, ast.For | ast.comprehension):
        value, targets = node.iter, [node.target]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"append", "extend"}
    ):
        value, targets = ast.Tuple(elts=list(node.args)), [node.func.value]
    if value is None or not timed(value):
        return set()
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def timed_names(scope: ast.AST, integration: bool) -> set[str]:
    """Local names that hold a time: a reading of the clock, or (integration) a measured time or
    rate, or anything computed from one."""
    names: set[str] = set()
    while True:
        timed = timed_by(names, integration)
        found = names | {name for node in ast.walk(scope) for name in bound_from(node, timed)}
        if found == names:
            return names
        names = found


def numbers_outside_calls(node: ast.AST) -> Iterator[float]:
    """The numeric literals of an operand, except inside calls (a call's own arguments are not a bound)."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        yield float(node.value)
    elif isinstance(node, ast.UnaryOp):
        yield from (-v for v in numbers_outside_calls(node.operand))
    elif isinstance(node, ast.BinOp):
        yield from numbers_outside_calls(node.left)
        yield from numbers_outside_calls(node.right)


def is_tolerant_approx(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not any(k.arg in {"rel", "abs"} for k in node.keywords):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "approx") or (
        isinstance(func, ast.Name) and func.id == "approx"
    )


def judges_time(compare: ast.Compare, timed: Callable[[ast.AST], bool]) -> bool:
    operands = [compare.left, *compare.comparators]
    if not any(timed(o) for o in operands):
        return False
    bounded = any(v != 0 for o in operands for v in numbers_outside_calls(o))
    return bounded or any(is_tolerant_approx(o) for o in operands)


def timed_by(names: set[str], integration: bool) -> Callable[[ast.AST], bool]:
    """Whether an expression is a time: it reads the clock (or a name holding a reading), or, in an
    integration test, a measured time or rate."""
    return lambda node: reads_clock(node, names) or (integration and reads_timed_result(node))


def wall_clock_judgements(source: str, integration: bool) -> list[int]:
    """Line numbers of the asserts in `source` that judge the wall clock (module docstring)."""
    found: set[int] = set()
    for scope in ast.walk(ast.parse(source)):
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            timed = timed_by(timed_names(scope, integration), integration)
            for check in (n for n in ast.walk(scope) if isinstance(n, ast.Assert)):
                compares = [n for n in ast.walk(check.test) if isinstance(n, ast.Compare)]
                found |= {check.lineno for c in compares if judges_time(c, timed)}
    return sorted(found)


def test_no_test_judges_the_wall_clock() -> None:
    offences = []
    for path in sorted(TESTS.rglob("*.py")):
        integration = "integration" in path.relative_to(TESTS).parts
        for line in wall_clock_judgements(path.read_text(encoding="utf-8"), integration):
            offences.append(f"{path.relative_to(REPO)}:{line}")
    assert offences == [], "these asserts judge the wall clock (docs/decisions/0013): " + ", ".join(offences)


# (source, integration): each judges the wall clock
JUDGED = [
    ("sent = time.monotonic()\nstop()\nassert time.monotonic() - sent < 20", False),
    ("t0 = time.monotonic()\ntook = time.monotonic() - t0\nassert took < 5", False),
    ("assert time.monotonic() - sent >= 0.55", False),
    ("now = datetime.now()\nassert (datetime.now() - now).seconds < 3", False),
    ("assert 120 < entry['decode_tok_s'] < 180", True),
    ("assert entry['chk'] < 1.5, entry", True),
    ("assert a['total_tok_s'] > 2.5 * b['total_tok_s']", True),
    ("assert r['itl_median_s'] == pytest.approx(median(gaps), rel=0.05)", True),
    ("assert record.itl_median_s == approx(0.02, abs=0.005)", True),
    ("assert all(0 <= lag < 0.002 for lag in lags)", True),
    ("assert all(0 <= t - w < 0.002 for t, w in zip(r.event_times, w))", True),
    ("ratios = []\nfor r in rows:\n    ratios.append(r['decode_tok_s'])\nassert median(ratios) > 1", True),
]
# (source, integration): each lets the clock be
NOT_JUDGED = [
    ("assert entry['ttft_s'] > 0 and entry['errors'] == 0", True),  # a time was measured
    ("assert row['arrival_mono'] <= row['first_token_mono']", True),  # an ordering
    ("assert e['chk'] == pytest.approx(e['decode_tok_s'] * 4 / e['total_tok_s'])", True),  # a formula
    ("assert launcher.wait_exit(timeout_s=60) == 1", True),  # an event wait's deadline
    ("assert 5.0 <= result.duration_s <= 6.0", False),  # a unit test's fake clock
    ("assert clock.monotonic() - clock.start >= 1001", False),
    ("assert 950 < entry['prompt_tokens'] < 1050", True),
    ("assert len(record.event_times) == 4", True),  # a count of stamps
    ("timed = sorted(rows, key=lambda r: r['first_mono'])\nassert len(timed) == 2", True),
    ("seen = stream_times(url)\nassert seen[-1]['usage']['completion_tokens'] == 60", True),
    ("took = time.monotonic()\nprint(f'{took:.1f} s')", True),  # reported, not judged
]


def as_test(body: str) -> str:
    return "def test():\n" + "".join(f"    {line}\n" for line in body.splitlines())


def test_the_rule_finds_each_kind_of_clock_judgement() -> None:
    for body, integration in JUDGED:
        assert wall_clock_judgements(as_test(body), integration) != [], body


def test_the_rule_lets_behaviour_orderings_formulas_and_fake_clocks_through() -> None:
    for body, integration in NOT_JUDGED:
        assert wall_clock_judgements(as_test(body), integration) == [], body
