"""The supervisor and the serving watch read time only through `basis.clock.Clock`, so their timing
rules (the watch's verdicts, the park's deadlines, a reload's downtime) run on a fake clock.

Read with `ast` over launcher/supervisor/ and launcher/watch/: no `time` module, no `datetime.now`,
and every wait on an event with a timeout goes through a clock (`clock.wait(event, timeout_s)`).
What may still block with a timeout of its own is listed below with its reason: the end of another
process or thread, or a poll on file descriptors — none of them a rule about time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

FOLDERS = (REPO / "launcher" / "supervisor", REPO / "launcher" / "watch")
WALL_CLOCK = {("datetime", "now"), ("datetime", "utcnow"), ("date", "today")}
WAITS = {"wait", "wait_for"}
# (file, the call's text): a bounded wait for something else to end, not a timing rule.
ROUNDS_DONE = "self._rounds.wait_for(lambda: self._done >= mine or self._stopped.is_set(), timeout_s)"
LOG_CHANGED = "self._changed.wait_for(lambda: self._version != self._seen_version, timeout=timeout_s)"
BOUNDED_OS_WAITS = {
    ("engine.py", "self._keeper.wait(timeout=5.0)"),  # the log keeper process, after its writer left
    ("group_watch.py", ROUNDS_DONE),  # the watch thread's re-read of the process table
    ("livelog.py", LOG_CHANGED),  # a gate waiting for the engine's next line (its deadline is the gate's)
}


def _files() -> Iterator[Path]:
    for folder in FOLDERS:
        yield from sorted(folder.glob("*.py"))


def _clock_reads(tree: ast.AST) -> Iterator[str]:
    """The direct time calls in a module, as text."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (f"import {a.name}" for a in node.names if a.name == "time")
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            yield f"from time import {', '.join(a.name for a in node.names)}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if (name, node.func.attr) in WALL_CLOCK:
                yield ast.unparse(node)


def _timed_waits(tree: ast.AST) -> Iterator[str]:
    """Calls of `wait`/`wait_for` with a timeout whose receiver is not a clock."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in WAITS or not (node.args or node.keywords):
            continue
        receiver = ast.unparse(node.func.value)
        if not receiver.endswith("clock"):
            yield ast.unparse(node)


def test_no_direct_time_call_in_the_supervisor_or_the_watch() -> None:
    found = {
        f"{path.relative_to(REPO)}: {call}"
        for path in _files()
        for call in _clock_reads(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert not found, f"read time through basis.clock.Clock: {sorted(found)}"


def test_every_timed_wait_goes_through_the_clock() -> None:
    found = set()
    for path in _files():
        for call in _timed_waits(ast.parse(path.read_text(encoding="utf-8"))):
            if (path.name, call) not in BOUNDED_OS_WAITS:
                found.add(f"{path.relative_to(REPO)}: {call}")
    assert not found, f"wait through clock.wait(event, timeout_s): {sorted(found)}"


def test_the_listed_os_waits_still_exist() -> None:
    # A listed exception that no longer exists would let a new one in under its name.
    seen = set()
    for path in _files():
        seen |= {(path.name, call) for call in _timed_waits(ast.parse(path.read_text(encoding="utf-8")))}
    assert seen >= BOUNDED_OS_WAITS, f"gone, drop them from the list: {sorted(BOUNDED_OS_WAITS - seen)}"


def test_the_scan_finds_what_it_forbids() -> None:
    tree = ast.parse(
        "import time\n"
        "from time import monotonic\n"
        "from datetime import datetime\n"
        "def f(event, clock):\n"
        "    datetime.now(UTC)\n"
        "    event.wait(timeout=1)\n"
        "    event.wait(2)\n"
        "    self.clock.wait(event, 3)\n"
        "    event.wait()\n"
    )
    assert sorted(_clock_reads(tree)) == ["datetime.now(UTC)", "from time import monotonic", "import time"]
    assert sorted(_timed_waits(tree)) == ["event.wait(2)", "event.wait(timeout=1)"]
