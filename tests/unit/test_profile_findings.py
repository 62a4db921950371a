"""Findings (launcher/profile/findings.py): every problem collected at once, errors apart from
warnings, each placed at its file and key, with a did-you-mean only where a key is really close."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.profile.findings import Finding, Findings, Level, did_you_mean, where


def test_errors_and_warnings_are_kept_apart_in_the_order_found() -> None:
    found = Findings()
    found.error("e1")
    found.warn("w1")
    found.error_or_warn(True, "w2")
    found.error_or_warn(False, "e2")
    assert found.errors == ["e1", "e2"] and found.warnings == ["w1", "w2"]
    assert found.items[2] == Finding(Level.WARNING, "w2")


def test_a_finding_names_its_file_and_key_or_the_key_alone() -> None:
    assert where(Path("profiles/prod.toml"), "args.max_num_seqs") == "profiles/prod.toml: args.max_num_seqs"
    assert where(None, "engine.model") == "engine.model"


KEYS = ["max_num_seqs", "max_model_len", "gpu_memory_utilization", "block_size", "enforce_eager"]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("max_num_seq", "max_num_seqs"),
        ("max_nums_seqs", "max_num_seqs"),
        ("max_model_length", "max_model_len"),
        ("gpu_memory_utilisation", "gpu_memory_utilization"),
        ("blocksize", "block_size"),
        ("enforce-eager", "enforce_eager"),
    ],
)
def test_a_near_miss_gets_the_key_it_was_meant_to_be(typed: str, meant: str) -> None:
    assert did_you_mean(typed, KEYS) == f"; did you mean {meant}?"


@pytest.mark.parametrize("typed", ["tensor_parallel_size", "seed", "x", ""])
def test_a_word_close_to_nothing_gets_no_hint(typed: str) -> None:
    assert did_you_mean(typed, KEYS) == ""


def test_only_the_closest_key_is_offered_and_none_from_nothing() -> None:
    assert did_you_mean("max_num_seqs", ["max_num_seqs", "max_num_seq"]) == "; did you mean max_num_seqs?"
    assert did_you_mean("anything", []) == ""
    assert did_you_mean("heath", (k for k in ("health", "smoke"))) == "; did you mean health?", "any iterable"
