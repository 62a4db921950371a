"""The degeneration score: distinct trigram ratio, answers and reasoning apart."""

from __future__ import annotations

import pytest

from launcher.bench import corpus
from launcher.bench.repetition import DEGENERATE_BELOW, distinct_ngram_ratio, is_degenerate, units


def test_real_prose_in_both_languages_scores_high() -> None:
    for paragraph in corpus.paragraphs()[:5] + corpus.paragraphs()[-5:]:
        score = distinct_ngram_ratio(paragraph.text)
        assert score is not None and score > 0.9, paragraph.text[:40]


def test_a_looping_phrase_scores_near_zero() -> None:
    score = distinct_ngram_ratio(" ".join(["the river bends again"] * 100))
    assert score is not None and score < 0.05 and is_degenerate(score)


def test_chinese_loops_are_caught_by_characters() -> None:
    assert is_degenerate(distinct_ngram_ratio("我们再想一想。" * 60))


def test_short_text_has_no_score() -> None:
    assert distinct_ngram_ratio("Yes, of course.") is None
    assert not is_degenerate(None)


def test_units_split_words_and_cjk_characters() -> None:
    assert units("Hello, 世界 42!") == ["hello", "世", "界", "42"]
    assert DEGENERATE_BELOW == 0.5


def test_twelve_trigrams_are_the_least_that_get_a_score() -> None:
    words = [f"w{chr(97 + i)}" for i in range(14)]  # 14 distinct words: exactly 12 trigrams
    assert distinct_ngram_ratio(" ".join(words)) == 1.0
    assert distinct_ngram_ratio(" ".join(words[:13])) is None  # 11 trigrams: too short to judge


def test_the_ratio_is_distinct_trigrams_over_all_trigrams() -> None:
    # "a b c" looped over 14 words: 12 trigrams, of which only abc, bca and cab are distinct
    looped = " ".join(["alpha", "beta", "gamma"] * 5)[: -len(" gamma")]
    assert len(units(looped)) == 14
    assert distinct_ngram_ratio(looped) == pytest.approx(3 / 12)


def test_case_and_punctuation_do_not_make_a_loop_look_new() -> None:
    plain = " ".join(["the river bends"] * 6)
    dressed = " ".join(["The river, BENDS!"] * 6)
    assert distinct_ngram_ratio(dressed) == distinct_ngram_ratio(plain)


def test_digits_and_letters_are_separate_units_and_underscores_split_words() -> None:
    assert units("route66 snake_case 3.14") == ["route", "66", "snake", "case", "3", "14"]


def test_degenerate_is_strictly_below_one_half() -> None:
    assert not is_degenerate(DEGENERATE_BELOW)
    assert is_degenerate(DEGENERATE_BELOW - 1e-9)


def test_other_n_gram_sizes_count_the_same_way() -> None:
    words = " ".join(["one", "two"] * 7)  # 14 words, 13 bigrams of which "one two" and "two one" differ
    assert distinct_ngram_ratio(words, n=2) == pytest.approx(2 / 13)


def test_a_latin_word_glued_to_chinese_stops_at_the_first_cjk_character() -> None:
    assert units("GPU显存不足") == ["gpu", "显", "存", "不", "足"]
    assert units("先用GPU算") == ["先", "用", "gpu", "算"]


def test_a_chinese_loop_with_a_latin_term_and_no_spaces_is_still_caught() -> None:
    # Chinese puts no space around a Latin term; were letters and CJK one word, this loop would be five
    # units long, too short to score, and a degenerate answer would pass unseen
    assert is_degenerate(distinct_ngram_ratio("我们先用GPU算一下再看" * 60))
