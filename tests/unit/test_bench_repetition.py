"""The degeneration score: distinct trigram ratio, answers and reasoning apart."""

from __future__ import annotations

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
