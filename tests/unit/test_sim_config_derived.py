"""Values `vllm_sim/config.py` derives rather than reads: the model runner per vLLM version and drafting
method, what that runner captures of the configured sizes (the real 0.26.0 ngram and draft-model runs),
the names clients must send, the dev routes' variable, and the memory plan's graph count.
"""

from __future__ import annotations

import pytest

from tests.real_runs import RUNS, sim_config
from vllm_sim.config import StartupRefused

NGRAM_SIZES = '{"cudagraph_capture_sizes": [1, 2, 4, 8]}'
DRAFT_SIZES = '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 48, 64]}'


def spec(method: str, tokens: int) -> str:
    return f'{{"method": "{method}", "num_speculative_tokens": {tokens}}}'


@pytest.mark.parametrize(
    ("version", "method", "runner"),
    [
        ("0.26", None, "V2"),
        ("0.26", "ngram", "V1"),  # tiny-ngram.log: "Model Runner V2 does not yet support ngram/ngram_gpu"
        ("0.26", "draft_model", "V1"),  # scripts/real-vllm/profiles/tiny-draft.toml's run
        ("0.26", "eagle", "V2"),
        ("0.26", "mtp", "V2"),
        ("0.26", "qwen3_next_mtp", "V2"),  # a model's own MTP is `mtp` (0.26.0 config/speculative.py:686)
        ("0.33", "ngram", "V2"),
        ("0.33", None, "V2"),
    ],
)
def test_the_runner_follows_the_version_and_the_drafting_method(
    version: str, method: str | None, runner: str
) -> None:
    flags = ["--sim-vllm-version", version] + (["--speculative-config", spec(method, 2)] if method else [])
    assert sim_config(RUNS["tiny"], *flags).runner == runner


def test_the_real_ngram_run_configured_1_2_4_8_and_captured_3_and_6() -> None:
    """tiny-ngram.log: the config line printed [1, 2, 4, 8]; the V1 runner rounds to multiples of 1 + k."""
    cfg = sim_config(RUNS["tiny-ngram"])
    assert cfg.graphs.sizes == (1, 2, 4, 8)
    assert cfg.captured.sizes == (3, 6) and cfg.captured.max_size == 6
    assert (cfg.captured.piecewise_sizes, cfg.captured.full_sizes) == ((3, 6), (3, 6))


def test_a_draft_model_with_one_token_drops_the_size_one() -> None:
    """scripts/real-vllm/profiles/tiny-draft.toml: [1, 2, 4, 8, 16, 32, 48, 64] with k = 1 captured
    [2, 4, 8, 16, 32, 48, 64] on 0.26.0's V1 runner, PIECEWISE 7 and FULL 7."""
    cfg = sim_config(RUNS["tiny"], "--max-num-seqs", "32", "--compilation-config", DRAFT_SIZES,
                     "--speculative-config", spec("draft_model", 1))  # fmt: skip
    assert cfg.captured.sizes == (2, 4, 8, 16, 32, 48, 64)
    assert (len(cfg.captured.piecewise_sizes), len(cfg.captured.full_sizes)) == (7, 7)


def test_v2_keeps_the_configured_sizes_for_a_method_it_runs() -> None:
    cfg = sim_config(
        RUNS["tiny"], "--compilation-config", NGRAM_SIZES, "--speculative-config", spec("eagle", 2)
    )
    assert cfg.runner == "V2" and cfg.captured.piecewise_sizes == (1, 2, 4, 8)


def test_without_drafting_the_runner_captures_what_is_configured() -> None:
    cfg = sim_config(RUNS["tiny"], "--compilation-config", NGRAM_SIZES)
    assert cfg.rounded is not None and cfg.captured.sizes == cfg.graphs.sizes == (1, 2, 4, 8)


def test_the_memory_plan_counts_every_graph_the_runner_captures() -> None:
    compiled = sim_config(RUNS["tiny"]).memory()
    eager = sim_config(RUNS["eager"]).memory()
    ngram = sim_config(RUNS["tiny-ngram"]).memory()
    assert eager.graph_gib == 0.0
    assert compiled.graph_gib == pytest.approx(0.006 * 102)  # PIECEWISE 51 + FULL 51
    assert ngram.graph_gib == pytest.approx(0.006 * 4)  # [3, 6] twice


def test_clients_send_the_first_served_name_unless_a_fault_serves_another() -> None:
    cfg = sim_config(RUNS["tiny"], "--served-model-name", "tiny", "tiny-alias")
    assert (cfg.model_label, cfg.card_names) == ("tiny", ("tiny", "tiny-alias"))
    wrong = sim_config(RUNS["tiny"], "--sim-serve-model-name", "other")
    assert (wrong.model_label, wrong.card_names) == ("other", ("other",))


@pytest.mark.parametrize(("value", "dev_mode"), [("1", True), ("0", False), ("2", True), (" 1 ", True)])
def test_dev_mode_is_the_variable_read_as_an_integer(value: str, dev_mode: bool) -> None:
    """0.26.0 envs.py:1349 reads `bool(int(VLLM_SERVER_DEV_MODE))`."""
    assert sim_config(RUNS["tiny"], environ={"VLLM_SERVER_DEV_MODE": value}).dev_mode is dev_mode


def test_a_dev_mode_that_is_no_integer_stops_vllm_before_it_starts() -> None:
    with pytest.raises(StartupRefused) as refused:
        sim_config(RUNS["tiny"], environ={"VLLM_SERVER_DEV_MODE": "yes"})
    assert refused.value.lines == ["ValueError: invalid literal for int() with base 10: 'yes'"]


def test_dev_mode_is_off_without_the_variable() -> None:
    assert sim_config(RUNS["tiny"]).dev_mode is False
