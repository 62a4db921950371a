"""Inheritance, merging and provenance; every bad input gives a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.errors import BadInput, ProfileNotFound, ProfileSyntaxError
from launcher.profile.loader import read_toml, resolve


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def test_tables_merge_key_by_key_and_arrays_are_replaced(profiles_dir: Path) -> None:
    base = _write(
        profiles_dir, "base", '[args]\na = 1\nsizes = [1, 2]\ncc = { x = 1, y = 2 }\n[env]\nE = "1"\n'
    )
    child = _write(profiles_dir, "child", 'extends = "base"\n[args]\nb = 2\nsizes = [4]\ncc = { y = 3 }\n')
    profile = resolve(profiles_dir, "child")
    assert profile.chain == ("child", "base")
    assert profile.data["args"] == {"a": 1, "sizes": [4], "cc": {"x": 1, "y": 3}, "b": 2}
    assert profile.data["env"] == {"E": "1"}
    assert "extends" not in profile.data
    assert profile.source_of("args.a") == base
    assert profile.source_of("args.sizes") == child
    assert profile.source_of("args.cc.x") == base
    assert profile.source_of("args.cc.y") == child
    assert profile.source_of("env") == base


def test_three_level_chain(profiles_dir: Path) -> None:
    _write(profiles_dir, "a", "[args]\nv = 1\nw = 1\n")
    _write(profiles_dir, "b", 'extends = "a"\n[args]\nv = 2\n')
    _write(profiles_dir, "c", 'extends = "b"\n[args]\nw = 3\n')
    profile = resolve(profiles_dir, "c")
    assert profile.chain == ("c", "b", "a")
    assert profile.data["args"] == {"v": 2, "w": 3}


def test_extends_cycle_is_an_error(profiles_dir: Path) -> None:
    _write(profiles_dir, "a", 'extends = "b"\n')
    _write(profiles_dir, "b", 'extends = "a"\n')
    with pytest.raises(BadInput, match="cycle: a → b → a"):
        resolve(profiles_dir, "a")


def test_missing_profile_lists_the_existing_ones(profiles_dir: Path) -> None:
    _write(profiles_dir, "prod", "")
    _write(profiles_dir, "demo", "")
    with pytest.raises(ProfileNotFound, match=r"no profile 'prdo' .*profiles there: demo, prod"):
        resolve(profiles_dir, "prdo")


def test_missing_parent_is_reported(profiles_dir: Path) -> None:
    _write(profiles_dir, "child", 'extends = "nope"\n')
    with pytest.raises(ProfileNotFound, match="no profile 'nope'"):
        resolve(profiles_dir, "child")


def test_syntax_error_names_file_line_and_column(profiles_dir: Path) -> None:
    path = _write(profiles_dir, "bad", "[args]\nmax_num_seqs = 32\ngpu_memory_utilization == 0.3\n")
    with pytest.raises(ProfileSyntaxError) as caught:
        resolve(profiles_dir, "bad")
    assert str(caught.value).startswith(f"{path}:3:")


def test_unreadable_file_is_a_clear_error(profiles_dir: Path) -> None:
    # A directory where a file should be fails to read even as root (CI runs as root).
    (profiles_dir / "dir.toml").mkdir()
    with pytest.raises(BadInput, match=r"cannot read .*dir.toml"):
        read_toml(profiles_dir / "dir.toml")
    if os.geteuid() != 0:
        path = _write(profiles_dir, "secret", "")
        path.chmod(0)
        with pytest.raises(BadInput, match="cannot read"):
            resolve(profiles_dir, "secret")


def test_not_utf8_and_a_directory_are_clear_errors(profiles_dir: Path) -> None:
    (profiles_dir / "latin.toml").write_bytes(b'description = "caf\xe9"\n')
    with pytest.raises(BadInput, match="not UTF-8"):
        resolve(profiles_dir, "latin")
    (profiles_dir / "folder.toml").mkdir()
    with pytest.raises(ProfileNotFound):
        resolve(profiles_dir, "folder")


def test_extends_must_be_a_string(profiles_dir: Path) -> None:
    _write(profiles_dir, "p", "extends = 3\n")
    with pytest.raises(BadInput, match="'extends' must be a profile name"):
        resolve(profiles_dir, "p")
