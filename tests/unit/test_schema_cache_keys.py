"""The schema cache's decisions in-process (`launcher/profile/schema_cache.py`): where it lives, which
changes to an installed vLLM make a new key, and what a cache file must hold to be believed. The
subprocess test beside it (test_schema_cache.py) proves the whole read-once path with a stand-in vLLM.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.profile import schema_cache


def test_the_cache_is_vllm_gate_cache_then_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VLLM_GATE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert schema_cache.cache_dir() == tmp_path / "home" / ".cache" / "vllm-gate"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert schema_cache.cache_dir() == tmp_path / "xdg" / "vllm-gate"
    monkeypatch.setenv("VLLM_GATE_CACHE", str(tmp_path / "mine"))
    assert schema_cache.cache_dir() == tmp_path / "mine"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A vLLM package's layout: the files that declare flags, and one that does not."""
    root = tmp_path / "site" / "vllm"
    for name in (
        "engine/arg_utils.py",
        "entrypoints/openai/cli_args.py",
        "envs.py",
        "config/model.py",
        "worker.py",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("# declarations\n", encoding="utf-8")
    return root


def test_the_key_is_stable_while_nothing_that_declares_flags_changes(package: Path) -> None:
    first = schema_cache.key_for(package)
    assert first == schema_cache.key_for(package)
    (package / "worker.py").write_text("# a much longer change elsewhere\n" * 10, encoding="utf-8")
    assert schema_cache.key_for(package) == first
    assert first.startswith("vllm-") and len(first.rsplit("-", 1)[1]) == 16


@pytest.mark.parametrize(
    "changed", ["engine/arg_utils.py", "entrypoints/openai/cli_args.py", "envs.py", "config/model.py"]
)
def test_an_edit_to_a_file_that_declares_flags_makes_a_new_key(package: Path, changed: str) -> None:
    """A fork's edited arg_utils.py, or a new config field: the cached schema would be wrong."""
    before = schema_cache.key_for(package)
    (package / changed).write_text("# declarations, and one more flag\n", encoding="utf-8")
    assert schema_cache.key_for(package) != before


def test_a_touched_file_of_the_same_size_makes_a_new_key(package: Path) -> None:
    before = schema_cache.key_for(package)
    stat = (package / "envs.py").stat()
    os.utime(package / "envs.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert schema_cache.key_for(package) != before


def test_a_new_config_module_makes_a_new_key(package: Path) -> None:
    before = schema_cache.key_for(package)
    (package / "config" / "kernel.py").write_text("# a new config class\n", encoding="utf-8")
    assert schema_cache.key_for(package) != before


def test_the_same_files_elsewhere_are_another_install(package: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-site" / "vllm"
    other.parent.mkdir()
    package.rename(other)
    moved = schema_cache.key_for(other)
    other.rename(package)
    assert moved != schema_cache.key_for(package)


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("VLLM_GATE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_what_was_written_is_read_back(cache: Path) -> None:
    data = {
        "vllm_version": "0.26.0",
        "options": {"--max-num-seqs": {"dest": "max_num_seqs", "kind": "value"}},
    }
    schema_cache.write("vllm-0.26.0-0123456789abcdef", data)
    assert schema_cache.read("vllm-0.26.0-0123456789abcdef") == data
    assert schema_cache.read("vllm-0.26.0-fedcba9876543210") is None


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"vllm_version": "0.26.0"}', ""])
def test_a_cache_file_that_is_not_a_schema_is_not_believed(cache: Path, text: str) -> None:
    cache.mkdir()
    (cache / "vllm-x.json").write_text(text, encoding="utf-8")
    assert schema_cache.read("vllm-x") is None


def test_a_cache_that_cannot_be_written_is_skipped_silently(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n", encoding="utf-8")
    monkeypatch.setenv("VLLM_GATE_CACHE", str(blocker / "cache"))
    schema_cache.write("vllm-x", {"options": {}})  # no exception: the next run reads vLLM again
    assert schema_cache.read("vllm-x") is None
    assert blocker.read_text(encoding="utf-8") == "not a directory\n"
