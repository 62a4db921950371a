"""The workload builder: same prompts at every level, real text, lengths, seeds."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from launcher.bench import corpus
from launcher.bench.workload import ContextSpec, Workload, parse_contexts, request_body, slot_seed
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
