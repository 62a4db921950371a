"""Inheritance, merging and provenance; every bad input gives a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.errors import BadInput, ProfileNotFound, ProfileSyntaxError
from launcher.profile.loader import (
    available_profiles,
    check_name,
    link_note,
    link_outside,
    read_toml,
    resolve,
)


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


def test_a_profile_that_extends_itself_is_a_cycle_of_one(profiles_dir: Path) -> None:
    _write(profiles_dir, "a", 'extends = "a"\n')
    with pytest.raises(BadInput, match="cycle: a → a"):
        resolve(profiles_dir, "a")


def test_a_cycle_entered_further_up_the_chain_is_named_from_the_start(profiles_dir: Path) -> None:
    _write(profiles_dir, "top", 'extends = "b"\n')
    _write(profiles_dir, "b", 'extends = "c"\n')
    _write(profiles_dir, "c", 'extends = "b"\n')
    with pytest.raises(BadInput, match="cycle: top → b → c → b") as caught:
        resolve(profiles_dir, "top")
    assert caught.value.hint == "remove one of the 'extends' keys"


def test_a_parent_name_is_checked_like_any_profile_name(profiles_dir: Path) -> None:
    _write(profiles_dir, "child", 'extends = "../etc/passwd"\n')
    with pytest.raises(BadInput, match="invalid profile name '../etc/passwd'"):
        resolve(profiles_dir, "child")


def test_abstract_describes_one_file_and_is_never_inherited(profiles_dir: Path) -> None:
    _write(profiles_dir, "base", 'abstract = true\n[engine]\nmodel = "m"\n')
    _write(profiles_dir, "child", 'extends = "base"\n')
    assert "abstract" not in resolve(profiles_dir, "child").data
    assert resolve(profiles_dir, "base").data["abstract"] is True
    _write(profiles_dir, "also", 'extends = "base"\nabstract = true\n')
    assert resolve(profiles_dir, "also").data["abstract"] is True, "a file may say it of itself"


def test_a_childs_spelling_overrides_the_parents_whatever_the_dashes(profiles_dir: Path) -> None:
    base = _write(profiles_dir, "base", "[args]\nmax-num-seqs = 32\ngpu_memory_utilization = 0.9\n")
    child = _write(profiles_dir, "child", 'extends = "base"\n[args]\nmax_num_seqs = 8\n')
    profile = resolve(profiles_dir, "child")
    assert profile.data["args"] == {"max_num_seqs": 8, "gpu_memory_utilization": 0.9}
    assert profile.source_of("args.max_num_seqs") == child
    assert profile.source_of("args.gpu_memory_utilization") == base


def test_one_file_setting_a_flag_in_two_spellings_is_refused(profiles_dir: Path) -> None:
    path = _write(profiles_dir, "p", "[args]\nmax_num_seqs = 8\nmax-num-seqs = 16\n")
    with pytest.raises(BadInput, match=r"\[args\] sets max_num_seqs twice") as caught:
        resolve(profiles_dir, "p")
    assert str(caught.value).startswith(str(path))


def test_a_table_replaced_by_a_value_forgets_the_tables_provenance(profiles_dir: Path) -> None:
    _write(profiles_dir, "base", "[args]\ncompilation_config = { level = 3, mode = 1 }\n")
    child = _write(profiles_dir, "child", 'extends = "base"\n[args]\ncompilation_config = "{}"\n')
    profile = resolve(profiles_dir, "child")
    assert profile.data["args"]["compilation_config"] == "{}"
    assert profile.source_of("args.compilation_config") == child
    assert profile.source_of("args.compilation_config.level") is None
    assert not any(k.startswith("args.compilation_config.") for k in profile.provenance)


def test_a_value_replaced_by_a_table_is_the_tables_file_throughout(profiles_dir: Path) -> None:
    _write(profiles_dir, "base", '[args]\nspeculative_config = "{\\"method\\": \\"ngram\\"}"\n')
    child = _write(
        profiles_dir, "child", 'extends = "base"\n[args]\nspeculative_config = { method = "mtp" }\n'
    )
    profile = resolve(profiles_dir, "child")
    assert profile.data["args"]["speculative_config"] == {"method": "mtp"}
    assert profile.provenance == {"args.speculative_config.method": child}
    assert profile.source_of("args.speculative_config") == child


def test_merging_never_changes_the_parents_own_values(profiles_dir: Path) -> None:
    _write(profiles_dir, "base", "[args]\ncc = { x = 1 }\n")
    _write(profiles_dir, "child", 'extends = "base"\n[args]\ncc = { y = 2 }\n')
    assert resolve(profiles_dir, "child").data["args"]["cc"] == {"x": 1, "y": 2}
    assert resolve(profiles_dir, "base").data["args"]["cc"] == {"x": 1}


def test_source_of_prefers_the_exact_key_then_the_first_value_of_a_table(profiles_dir: Path) -> None:
    base = _write(profiles_dir, "base", '[gates.health]\ntimeout_s = 5\n[env]\nA = "1"\n')
    child = _write(profiles_dir, "child", 'extends = "base"\n[gates.health]\npoll_s = 1\n')
    profile = resolve(profiles_dir, "child")
    assert profile.source_of("gates.health.poll_s") == child
    assert profile.source_of("gates.health") == base, "its first value came from base"
    assert profile.source_of("gates") == base
    assert profile.source_of("gate") is None, "a prefix of a key's name is not its table"
    assert profile.source_of("env.B") is None


def test_top_file_renders_a_snapshot_in_place_of_the_profile_with_its_parents(profiles_dir: Path) -> None:
    base = _write(profiles_dir, "base", "[args]\nblock_size = 16\n")
    _write(profiles_dir, "prod", 'extends = "base"\n[args]\nmax_num_seqs = 32\n')
    bak = profiles_dir / "prod.toml.bak_t"
    bak.write_text('extends = "base"\n[args]\nmax_num_seqs = 8\n')
    profile = resolve(profiles_dir, "prod", top_file=bak)
    assert profile.files == (bak, base) and profile.chain == ("prod", "base")
    assert profile.data["args"] == {"block_size": 16, "max_num_seqs": 8}
    assert profile.source_of("args.max_num_seqs") == bak


@pytest.mark.parametrize("name", ["p", "a" * 64, "prod-2.v1_x", "0"])
def test_profile_names_of_up_to_64_safe_characters_are_accepted(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "a" * 65, ".hidden", "-flag", "_x", "a/b", "a b", "prod\n", "é"])
def test_other_profile_names_are_refused_before_any_file_is_read(name: str) -> None:
    with pytest.raises(BadInput, match="invalid profile name") as caught:
        check_name(name)
    assert caught.value.hint is not None and "1-64 letters" in caught.value.hint


def test_a_very_long_name_is_shown_cut_with_its_length() -> None:
    with pytest.raises(BadInput) as caught:
        check_name("x" * 500)
    assert caught.value.message == f"invalid profile name {'x' * 80!r}… (500 characters)"


def test_only_toml_files_are_profiles_and_a_missing_dir_has_none(profiles_dir: Path) -> None:
    _write(profiles_dir, "b", "")
    _write(profiles_dir, "a", "")
    (profiles_dir / "a.toml.bak_t").write_text("")
    (profiles_dir / "notes.txt").write_text("")
    (profiles_dir / "dir.toml").mkdir()
    assert available_profiles(profiles_dir) == ["a", "b"]
    assert available_profiles(profiles_dir / "absent") == []


def test_a_link_that_leaves_the_profiles_dir_is_named_and_one_inside_is_not(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    repo = tmp_path / "config-repo"
    profiles.mkdir()
    repo.mkdir()
    (repo / "prod.toml").write_text("")
    (profiles / "prod.toml").symlink_to(repo / "prod.toml")
    (profiles / "base.toml").write_text("")
    (profiles / "alias.toml").symlink_to(profiles / "base.toml")
    assert link_outside(profiles, profiles / "prod.toml") == repo / "prod.toml"
    assert link_note(profiles, profiles / "prod.toml") == (
        f"{profiles / 'prod.toml'} is a link to {repo / 'prod.toml'}, outside {profiles}: "
        "that file is what is read and written"
    )
    assert link_outside(profiles, profiles / "alias.toml") is None
    assert link_outside(profiles, profiles / "base.toml") is None
    assert link_note(profiles, profiles / "base.toml") is None


def test_a_profile_over_the_size_bound_is_refused_before_it_is_parsed(profiles_dir: Path) -> None:
    path = profiles_dir / "big.toml"
    path.write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(BadInput, match="larger than a profile can be"):
        read_toml(path)
