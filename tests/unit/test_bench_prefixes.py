"""Nested-prefix detection: a "cold" prompt that begins with an earlier one is warm."""

from __future__ import annotations

from launcher.bench import corpus
from launcher.bench.prefixes import NESTED_SHARE, SharedPrefix, common_prefix_len, shared_prefixes
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


def test_common_prefix_length_agrees_with_a_plain_scan_on_every_cut() -> None:
    def scan(a: str, b: str) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    base = corpus.document(3, 400)
    for cut in range(0, len(base), 97):
        changed = base[:cut] + "\x00" + base[cut + 1 :]
        assert common_prefix_len(base, changed) == scan(base, changed) == cut
        assert common_prefix_len(base[:cut], base) == cut  # one is a prefix of the other
    assert common_prefix_len("ab", "ba") == 0


def test_a_share_of_exactly_the_threshold_counts_as_nested() -> None:
    assert NESTED_SHARE == 0.2
    [found] = shared_prefixes(["a", "abcde"])  # 1 of 5 characters
    assert (found.earlier, found.later, found.chars, found.share) == (0, 1, 1, 0.2)
    assert shared_prefixes(["a", "abcdef"]) == []  # 1 of 6


def test_the_longest_prefix_among_all_earlier_prompts_is_the_one_reported() -> None:
    [found] = shared_prefixes(["abcX", "abcdefY", "abcdefgh"], min_share=0.5)
    assert found == SharedPrefix(1, 2, 6, 0.75)  # prompt 1 covers 6 of 8, prompt 0 only 3


def test_an_empty_prompt_is_never_nested_and_the_first_prompt_never_either() -> None:
    assert shared_prefixes(["abc", ""]) == []
    assert shared_prefixes(["only one"]) == [] and shared_prefixes([]) == []


def test_a_later_prompt_that_an_earlier_one_contains_whole_is_fully_cached() -> None:
    [found] = shared_prefixes(["the whole document", "the whole"])
    assert found.share == 1.0 and found.chars == len("the whole")
