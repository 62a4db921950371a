"""Bounds on what the operator gives (launcher/profile/bounds.py) and the one-change-at-a-time lock
(launcher/state/change_lock.py); the real-process cases: tests/integration/test_hostile_changes.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.errors import BadInput, ChangeInProgress, ExitCode
from launcher.profile import bounds
from launcher.profile.edit import parse_assignment
from launcher.profile.loader import read_toml
from launcher.state.change_lock import ChangeLock
from launcher.state.store import StateStore


def test_nesting_depth_skips_strings() -> None:
    assert bounds.nesting_depth('[1, [2, {a = "]]]]"}]]') == 3
    assert bounds.nesting_depth("'[[[[' ") == 0
    assert bounds.nesting_depth('"a\\"[[[["') == 0


def test_value_problem_names_the_key() -> None:
    deep: object = 1
    for _ in range(bounds.MAX_DEPTH + 1):
        deep = [deep]
    problem = bounds.value_problem({"args": {"x": deep}}) or ""
    assert problem.startswith("args.x.0.") and problem.endswith(f"more than {bounds.MAX_DEPTH} levels deep")
    assert "entries" in (bounds.value_problem({"e": list(range(bounds.MAX_ITEMS + 1))}) or "")
    assert "characters" in (bounds.value_problem({"s": "x" * (bounds.MAX_TEXT_CHARS + 1)}) or "")
    assert bounds.value_problem({"args": {"compilation_config": {"pass_config": {"a": [1, 2]}}}}) is None


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="[]{}()\"',=0123456789abc \\", max_size=3000))
def test_no_assignment_value_is_a_recursion_error(raw: str) -> None:
    """Whatever is typed after `key=`, the answer is a value or BadInput (exit 2), never a crash."""
    try:
        parse_assignment(f"compilation_config={raw}")
    except BadInput as err:
        assert err.exit_code == ExitCode.BAD_INPUT


def test_bombs_are_refused_before_parsing() -> None:
    for raw in ("[" * 50_000 + "]" * 50_000, "{a=" * 20 + "1" + "}" * 20):
        with pytest.raises(BadInput, match="nested"):
            parse_assignment(f"compilation_config={raw}")
    with pytest.raises(BadInput, match="not a key"):
        parse_assignment("a." * 40 + "b=1")
    with pytest.raises(ValueError):
        bounds.loads_json("[" * 5000 + "]" * 5000)


def test_a_second_change_is_refused_naming_the_first(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(store.root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(ChangeInProgress) as err,
            ChangeLock(store, "prod", "launch rollback x --profile prod"),
        ):
            pass
        assert err.value.exit_code == ExitCode.PREFLIGHT_REFUSED
        assert f"`launch set prod (max_num_seqs) --apply` (pid {holder.pid})" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    with ChangeLock(store, "prod", "launch rollback x --profile prod"):  # a killed holder lets go
        pass


_HOLD = """
import sys, time
from pathlib import Path
from launcher.state.change_lock import ChangeLock
from launcher.state.store import StateStore
with ChangeLock(StateStore(Path(sys.argv[1])), "prod", "launch set prod (max_num_seqs) --apply"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_the_change_lock_is_not_taken_through_a_link(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    lock = store.change_lock_path("prod")
    lock.parent.mkdir(parents=True)
    lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BadInput, match="symbolic link"), ChangeLock(store, "prod", "x"):
        pass
    assert not (tmp_path / "elsewhere").exists()


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="[]{}\"'=,.ab1 \n", max_size=5000))
def test_no_profile_text_is_a_recursion_error(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    """A profile file holds whatever someone wrote: a value, or BadInput (exit 2), never a crash."""
    path = tmp_path_factory.mktemp("p") / "p.toml"
    path.write_text("x = " + text)
    try:
        read_toml(path)
    except BadInput as err:
        assert err.exit_code == ExitCode.BAD_INPUT


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_at_the_bound_passes_and_one_level_more_is_refused() -> None:
    assert bounds.value_problem(_nested(bounds.MAX_DEPTH)) is None
    path = ".".join(["0"] * bounds.MAX_DEPTH)  # the list at that depth, named by its indexes
    assert bounds.value_problem(_nested(bounds.MAX_DEPTH + 1)) == (
        f"{path}: nested more than {bounds.MAX_DEPTH} levels deep"
    )
    text = "[" * bounds.MAX_DEPTH + "]" * bounds.MAX_DEPTH
    bounds.check_text(text, "args.x")  # at the bound: nothing raised
    with pytest.raises(BadInput, match="args.x: nested 17 levels deep, more than a setting holds \\(16\\)"):
        bounds.check_text("[" + text + "]", "args.x")


def test_a_value_below_the_profiles_own_tables_starts_deeper() -> None:
    """`launch set args.x=VALUE`: the value sits two tables down, so two levels fewer are left to it."""
    assert bounds.value_problem(_nested(bounds.MAX_DEPTH - 2), start_depth=2) is None
    problem = bounds.value_problem(_nested(bounds.MAX_DEPTH - 1), start_depth=2)
    assert problem is not None and problem.endswith("levels deep")


def test_the_item_and_length_bounds_are_inclusive() -> None:
    assert bounds.value_problem(list(range(bounds.MAX_ITEMS))) is None
    assert (
        bounds.value_problem({"a": list(range(bounds.MAX_ITEMS + 1))}) == "a: 4,097 entries (at most 4,096)"
    )
    assert bounds.value_problem("x" * bounds.MAX_TEXT_CHARS) is None
    assert bounds.value_problem({"s": "x" * (bounds.MAX_TEXT_CHARS + 1)}) == (
        "s: a string of 65,537 characters (at most 65,536)"
    )
    assert bounds.value_problem("x" * (bounds.MAX_TEXT_CHARS + 1)) == (
        "value: a string of 65,537 characters (at most 65,536)"
    ), "a bare value is named as such"


def test_text_too_long_is_refused_with_its_length_and_a_bomb_for_its_depth_first() -> None:
    with pytest.raises(BadInput, match="args.x: 65,537 characters, more than a setting holds"):
        bounds.check_text("a" * (bounds.MAX_TEXT_CHARS + 1), "args.x")
    bomb = "[" * (bounds.MAX_TEXT_CHARS + 1)
    with pytest.raises(BadInput, match="nested 65,537 levels deep"):
        bounds.check_text(bomb, "args.x")


def test_brackets_in_strings_count_for_nothing() -> None:
    assert bounds.nesting_depth("a = 'C:\\dir\\' \nb = [1]") == 1, "a TOML literal string has no escapes"
    assert bounds.nesting_depth('x = "\\\\" \ny = [[1]]') == 2, "an escaped backslash ends no string"
    assert bounds.nesting_depth("f(g(h()))") == 3


def test_brackets_in_a_toml_comment_count_for_nothing() -> None:
    """Was: closers in a comment lowered the count, so the brackets after it went unseen and
    tomllib recursed into them: `launch set 'x=[ # ]]]…' + newline + '[[[…'` exited 70 (RecursionError)."""
    assert bounds.nesting_depth("x = [ # ]]]]\n[[1]]]") == 3
    assert bounds.nesting_depth("# [[[[[[\nx = 1") == 0
    assert bounds.nesting_depth('x = "#" \ny = [[1]]') == 2, "a # inside a string starts no comment"
    bomb = "[ #" + "]" * 3000 + "\n" + "[" * 3000
    with pytest.raises(BadInput, match="nested 3,001 levels deep"):
        parse_assignment(f"compilation_config={bomb}")


def test_json_from_the_operator_is_parsed_within_the_bounds() -> None:
    assert bounds.loads_json('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
    with pytest.raises(ValueError, match="too long or nested too deep"):
        bounds.loads_json('"' + "x" * bounds.MAX_TEXT_CHARS + '"')
    with pytest.raises(ValueError):
        bounds.loads_json("{not json")
