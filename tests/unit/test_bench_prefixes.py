"""Nested-prefix detection: a "cold" prompt that begins with an earlier one is warm."""

from __future__ import annotations

from launcher.bench import corpus
from launcher.bench.prefixes import common_prefix_len, shared_prefixes
from launcher.bench.workload import ContextSpec, Workload


def test_common_prefix_length() -> None:
    assert common_prefix_len("abcdef", "abcxyz") == 3
    assert common_prefix_len("abc", "abc") == 3
    assert common_prefix_len("", "abc") == 0


def test_the_field_note_trap_lengths_cut_from_one_document_are_nested() -> None:
    document = corpus.document(7, 6000)
    lengths = [len(document) // 8, len(document) // 4, len(document) // 2, len(document)]
    nested = shared_prefixes([document[:n] for n in lengths])
    assert [s.later for s in nested] == [1, 2, 3]
    assert nested[-1].share > 0.45  # the longest prompt was half cached by the one before


def test_the_workloads_cold_prompts_share_nothing() -> None:
    work = Workload("t1", 4)
    for spec in (ContextSpec("short", 0), ContextSpec("3k", 3000)):
        cold = [work.cold_prompt(spec, k).text for k in range(4)]
        assert shared_prefixes(cold) == []
        # "[cold " plus at most a few equal leading hex digits of two uuids: far below one cache block
        assert max(common_prefix_len(a, b) for a in cold for b in cold if a != b) <= len("[cold ") + 8
