"""The bench each arm runs (launcher/probe/presets.py): a named preset, then `launch bench`'s knobs
over it, and the one line the preview and the report describe it with (results.py `Settings`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.bench.options import BenchOptions
from launcher.errors import BadInput
from launcher.probe.presets import PRESETS, bench_options
from launcher.probe.results import DEFAULT_RUNS, DEFAULT_WARMUP_REQUESTS, Settings


def test_quick_is_one_short_context_a_single_user_and_a_small_crowd() -> None:
    quick = bench_options("quick")
    assert [c.name for c in quick.contexts] == ["short"] and quick.concurrency == (1, 4)
    assert (quick.rounds, quick.max_tokens, quick.prompts) == (3, 256, 4)


def test_standard_is_launch_benchs_own_defaults() -> None:
    assert bench_options("standard") == BenchOptions()


def test_an_unknown_preset_names_the_ones_there_are() -> None:
    with pytest.raises(BadInput, match="--bench 'fast' is not a preset") as err:
        bench_options("fast")
    assert err.value.hint == "one of: quick, standard" and list(PRESETS) == ["quick", "standard"]


def test_each_knob_replaces_only_its_own_setting() -> None:
    tuned = bench_options("quick", concurrency="8,2,2", contexts="8k", rounds=5, max_tokens=1024, prompts=2)
    assert tuned.concurrency == (2, 8) and [(c.name, c.tokens) for c in tuned.contexts] == [("8k", 8000)]
    assert (tuned.rounds, tuned.max_tokens, tuned.prompts) == (5, 1024, 2)
    assert tuned.temperature == PRESETS["quick"].temperature and tuned.seed == PRESETS["quick"].seed
    only_rounds = bench_options("quick", rounds=1)
    assert only_rounds.concurrency == (1, 4) and only_rounds.rounds == 1  # the rest stays the preset's


def test_the_presets_themselves_are_never_changed_by_a_knob() -> None:
    bench_options("quick", concurrency="16", rounds=9)
    assert PRESETS["quick"].concurrency == (1, 4) and PRESETS["quick"].rounds == 3


@pytest.mark.parametrize(
    ("knob", "value"), [("concurrency", "0,4"), ("concurrency", "a"), ("contexts", "huge")]
)
def test_a_bad_knob_is_the_same_refusal_as_launch_benchs(knob: str, value: str) -> None:
    with pytest.raises(BadInput, match=f"--{knob}"):
        bench_options("quick", **{knob: value})  # type: ignore[arg-type]


def test_the_settings_describe_the_bench_in_one_line(tmp_path: Path) -> None:
    settings = Settings(bench_options("quick", contexts="short,8k"), "quick", tmp_path)
    assert settings.describe_bench() == (
        "quick: contexts short,8k, concurrency 1,4, 3 rounds of 4 prompts, max_tokens 256"
    )
    assert (settings.runs, settings.warmup_requests) == (DEFAULT_RUNS, DEFAULT_WARMUP_REQUESTS) == (2, 4)
