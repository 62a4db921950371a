"""The workload builder: same prompts at every level, real text, lengths, seeds."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from launcher.bench import corpus
from launcher.bench.workload import (
    QUESTIONS_DOC,
    QUESTIONS_SHORT,
    ContextSpec,
    Workload,
    parse_contexts,
    request_body,
    slot_seed,
)
from launcher.errors import BadInput
from vllm_sim import tokenizer


def test_every_concurrency_level_runs_whole_copies_of_the_same_set() -> None:
    work = Workload("w1", 8)
    prompts = work.prompt_set(ContextSpec("short", 0))
    for level in (1, 2, 4, 8, 16, 32, 5):
        slots = work.round_slots(prompts, level)
        counts = Counter(s.prompt.index for s in slots)
        assert set(counts) == set(range(8)), level  # never PROMPTS[i % c]: c1 runs all eight too
        assert len(set(counts.values())) == 1, level  # each prompt equally often
        assert len(slots) >= level


def test_prompt_set_is_stable_and_mixes_languages() -> None:
    spec = ContextSpec("2k", 2000)
    first, again = Workload("w2", 6).prompt_set(spec), Workload("w2", 6).prompt_set(spec)
    assert [p.text for p in first] == [p.text for p in again]
    assert {p.lang for p in first} == {"en", "zh"}
    assert len({p.text[:60] for p in first}) == 6  # own headers: no shared cacheable prefix


def test_document_length_follows_the_calibrated_ratio() -> None:
    # the simulator's tokenizer stands in for the server: calibrate on a probe, then build 8k
    work = Workload("w3", 4)
    for lang in corpus.LANGS:
        probe = work.probe_prompt(lang)
        work.ratios[lang] = tokenizer.count(probe) / corpus.estimate_tokens(probe)
    for spec in (ContextSpec("8k", 8000), ContextSpec("28k", 28000)):
        for prompt in work.prompt_set(spec):
            assert tokenizer.count(prompt.text) == pytest.approx(spec.tokens, rel=0.02)


def test_documents_never_repeat_a_paragraph_back_to_back() -> None:
    text = corpus.document(11, 64000)
    paragraphs = text.split("\n\n")
    assert all(a != b for a, b in zip(paragraphs, paragraphs[1:], strict=False))
    assert corpus.estimate_tokens(text) == pytest.approx(64000, rel=0.01)


def test_parse_contexts() -> None:
    specs = parse_contexts("short, 8k,28K,64k,2000,8k")
    assert [(s.name, s.tokens) for s in specs] == [
        ("short", 0),
        ("8k", 8000),
        ("28k", 28000),
        ("64k", 64000),
        ("2000", 2000),
    ]
    with pytest.raises(BadInput):
        parse_contexts("huge")
    with pytest.raises(BadInput):
        parse_contexts(" , ")


def test_seeds_only_with_sampling_and_distinct_per_copy() -> None:
    work = Workload("w4", 2)
    slots = work.round_slots(work.prompt_set(ContextSpec("short", 0)), 4)
    assert len({slot_seed(1, s) for s in slots}) == len(slots)
    hi = [{"role": "user", "content": "hi"}]
    greedy = json.loads(request_body("m", hi, max_tokens=8, temperature=0.0, seed=5))
    sampled = json.loads(request_body("m", hi, max_tokens=8, temperature=0.7, seed=5))
    assert "seed" not in greedy and sampled["seed"] == 5
    assert sampled["stream_options"] == {"include_usage": True} and sampled["stream"] is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5k", [("1.5k", 1500)]),
        ("64", [("64", 64)]),  # the shortest document
        ("SHORT,Short", [("short", 0)]),
        ("8K,8k", [("8k", 8000)]),  # one context, however it is spelled
        ("2k,", [("2k", 2000)]),
    ],
)
def test_context_lengths_as_the_operator_writes_them(text: str, expected: list[tuple[str, int]]) -> None:
    assert [(s.name, s.tokens) for s in parse_contexts(text)] == expected


@pytest.mark.parametrize("bad", ["-8k", "8kk", "8m", "1e3", "k", "8 k", "0x40"])
def test_anything_else_is_not_a_context_length(bad: str) -> None:
    with pytest.raises(BadInput, match="is not a context length") as err:
        parse_contexts(bad)
    assert err.value.hint is not None and "8k" in err.value.hint


def test_a_document_shorter_than_64_tokens_is_refused_towards_short() -> None:
    with pytest.raises(BadInput, match="too short for a document") as err:
        parse_contexts("63")
    assert err.value.hint == "use `short` instead"
    with pytest.raises(BadInput, match="too short"):
        parse_contexts("0.06k")  # 60 tokens


@pytest.mark.parametrize(
    ("prompts", "concurrency", "copies"), [(8, 1, 1), (8, 8, 1), (8, 9, 2), (2, 5, 3), (3, 0, 1)]
)
def test_rounds_send_the_fewest_whole_copies_that_fill_the_concurrency(
    prompts: int, concurrency: int, copies: int
) -> None:
    work = Workload("w5", prompts)
    slots = work.round_slots(work.prompt_set(ContextSpec("short", 0)), concurrency)
    assert len(slots) == prompts * copies
    assert [s.copy for s in slots] == [c for c in range(copies) for _ in range(prompts)]


def test_slot_seeds_follow_the_documented_formula() -> None:
    work = Workload("w6", 3)
    slots = work.round_slots(work.prompt_set(ContextSpec("short", 0)), 6)
    third_of_copy_one = next(s for s in slots if s.copy == 1 and s.prompt.index == 2)
    assert slot_seed(7, third_of_copy_one) == 7 * 1_000_003 + 1 * 1009 + 2


def test_prompts_alternate_languages_and_walk_the_questions() -> None:
    prompts = Workload("w7", 4).prompt_set(ContextSpec("short", 0))
    assert [p.lang for p in prompts] == ["en", "zh", "en", "zh"]
    assert prompts[0].user.endswith(QUESTIONS_SHORT["en"][0]) and prompts[2].user.endswith(
        QUESTIONS_SHORT["en"][1]
    )
    assert prompts[3].user.endswith(QUESTIONS_SHORT["zh"][1])
    assert prompts[1].user.startswith("[bench w7 | short | prompt 2 of 4]\n")


def test_a_short_prompt_is_one_user_turn_and_a_document_comes_as_the_system_turn() -> None:
    work = Workload("w8", 2)
    short = work.prompt_set(ContextSpec("short", 0))[0]
    assert short.messages() == [{"role": "user", "content": short.user}] and short.text == short.user
    doc = work.prompt_set(ContextSpec("2k", 2000))[1]
    assert [m["role"] for m in doc.messages()] == ["system", "user"]
    assert doc.system.startswith("[bench w8 | 2k | prompt 2 of 2]\n\n") and doc.user == QUESTIONS_DOC["zh"][0]
    assert doc.text == f"{doc.system}\n\n{doc.user}"


def test_cold_prompts_are_new_every_time_and_say_so_first() -> None:
    work = Workload("w9", 2)
    a, b = (work.cold_prompt(ContextSpec("2k", 2000), 0) for _ in range(2))
    assert a.system.startswith("[cold ") and "| bench w9 | 2k | sample 1]" in a.system.split("\n", 1)[0]
    assert a.system != b.system and a.user == b.user  # same question, never the same document


def test_the_request_body_keeps_chinese_as_utf8_and_asks_for_usage() -> None:
    body = request_body("m", [{"role": "user", "content": "潮汐"}], max_tokens=64, temperature=0.0, seed=None)
    assert "潮汐".encode() in body  # not \\u escapes: the server counts the tokens of what we sent
    parsed = json.loads(body)
    assert parsed["max_tokens"] == 64 and parsed["temperature"] == 0.0 and "seed" not in parsed
    sampled = json.loads(request_body("m", [], max_tokens=1, temperature=0.5, seed=None))
    assert "seed" not in sampled  # sampling without a seed sends none rather than null


# ---- the corpus documents are built from -------------------------------------------------------------


def test_the_length_estimate_is_cjk_characters_plus_1_3_per_latin_word_or_number() -> None:
    assert corpus.estimate_tokens("Hello world 世界 42 don't") == pytest.approx(2 + 1.3 * 4)
    assert corpus.estimate_tokens("，。！") == 0.0  # punctuation is free


def test_a_paragraph_is_cut_at_the_last_sentence_end_within_its_share() -> None:
    assert corpus._cut("One two. Three four! Five six.", 0.5) == "One two."
    assert corpus._cut("一二三。四五六。", 0.6) == "一二三。"
    assert corpus._cut("no sentence end here at all", 0.3) == "no sente"  # no end: characters
    assert corpus._cut("Short.", 0.0) == "S"  # never empty


def test_a_language_sample_holds_only_that_language_and_stops_once_it_is_long_enough() -> None:
    for lang in corpus.LANGS:
        sample = corpus.language_sample(lang, 300.0)
        paras = [p for p in corpus.paragraphs() if p.text in sample.split("\n\n")]
        assert paras and {p.lang for p in paras} == {lang}
        assert sum(p.tokens_est for p in paras[:-1]) < 300.0 <= sum(p.tokens_est for p in paras)


def test_a_shuffle_never_starts_with_the_paragraph_the_last_one_ended_on() -> None:
    for seed in range(50):
        first = corpus.shuffled(random.Random(seed), None)[0]
        again = corpus.shuffled(random.Random(seed), first)  # the same order would start with it
        assert again[0] != first and sorted(p.text for p in again) == sorted(
            p.text for p in corpus.paragraphs()
        )


def test_documents_are_the_same_for_a_seed_and_differ_between_seeds() -> None:
    assert corpus.document(5, 3000) == corpus.document(5, 3000)
    assert corpus.document(5, 3000) != corpus.document(6, 3000)


def test_a_calibrated_ratio_shrinks_the_document_to_the_servers_count() -> None:
    # a tokenizer that counts twice our estimate: half the estimated text makes the same server tokens
    # (the last paragraph is cut at a sentence end, so a document falls short by less than a sentence)
    plain = corpus.estimate_tokens(corpus.document(9, 16000))
    doubled = corpus.estimate_tokens(corpus.document(9, 16000, {"en": 2.0, "zh": 2.0}))
    assert plain == pytest.approx(16000, rel=0.02) and doubled == pytest.approx(8000, rel=0.02)
