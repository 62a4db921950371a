"""vLLM's capture-size rule (config/vllm.py, config/compilation.py), checked on known configurations."""

from __future__ import annotations

import pytest

from vllm_flags.cudagraph_sizes import (
    CaptureConfig,
    configured_capture_sizes,
    expected_capture_sizes,
    expected_graphs,
    graph_ceiling_seqs,
    runner_from_env,
)


def test_defaults_give_51_sizes_up_to_512() -> None:
    sizes = expected_capture_sizes(CaptureConfig(max_num_seqs=1024, max_num_batched_tokens=8192))
    assert sizes is not None and len(sizes) == 51
    assert sizes[:4] == [1, 2, 4, 8] and sizes[-1] == 512


def test_default_max_follows_max_num_seqs() -> None:
    sizes = expected_capture_sizes(CaptureConfig(max_num_seqs=4, max_num_batched_tokens=2048))
    assert sizes == [1, 2, 4, 8]


def test_unknown_max_num_seqs_means_hardware_dependent() -> None:
    assert expected_capture_sizes(CaptureConfig()) is None


def test_user_sizes_are_sorted_deduplicated_and_capped() -> None:
    config = CaptureConfig(sizes=(8, 4, 4, 1, 4096), max_num_batched_tokens=2048)
    assert expected_capture_sizes(config) == [1, 4, 8]


FABLE_SIZES = (1, 2, 4, 8, 16, 32, 48, 64)


def test_mtp_runs_on_v2_which_rounds_only_its_full_decode_graphs() -> None:
    # fable-27b: [1,2,4,8,16,32,48,64] with MTP 1 → "decode graph 7/7" in the field; 0.26.0's V2
    # (v1/worker/gpu/cudagraph_utils.py:224-245) keeps the 8 mixed sizes and rounds the FULL ones.
    config = CaptureConfig(sizes=FABLE_SIZES, max_num_seqs=32, num_speculative_tokens=1, spec_method="mtp")
    assert config.model_runner == "V2"
    assert expected_capture_sizes(config) == list(FABLE_SIZES)
    assert expected_graphs(config) == {
        "PIECEWISE": list(FABLE_SIZES),
        "FULL": [2, 4, 8, 16, 32, 48, 64],
    }


@pytest.mark.parametrize("method", ["eagle", "eagle3", "mtp", "qwen3_next_mtp", "deepseek_mtp"])
def test_v2_methods_keep_small_sizes_for_mixed_batches(method: str) -> None:
    config = CaptureConfig(sizes=(1, 2, 4, 8), max_num_seqs=32, num_speculative_tokens=2, spec_method=method)
    assert expected_graphs(config) == {"PIECEWISE": [1, 2, 4, 8], "FULL": [3, 6]}


@pytest.mark.parametrize("method", ["ngram", "ngram_gpu", "draft_model", "suffix"])
def test_v1_methods_round_every_size_as_the_real_026_ngram_run(method: str) -> None:
    # tests/data/real-vllm-0.26/tiny-ngram.log: [1, 2, 4, 8] printed, PIECEWISE=2, FULL=2 (largest=6).
    config = CaptureConfig(sizes=(1, 2, 4, 8), max_num_seqs=32, num_speculative_tokens=2, spec_method=method)
    assert config.model_runner == "V1"
    assert expected_capture_sizes(config) == [3, 6]
    assert expected_graphs(config) == {"PIECEWISE": [3, 6], "FULL": [3, 6]}


def test_v1_does_not_round_without_full_decode_graphs() -> None:
    config = CaptureConfig(
        sizes=(1, 2, 4, 8), num_speculative_tokens=2, spec_method="ngram", cudagraph_mode="PIECEWISE"
    )
    assert expected_graphs(config) == {"PIECEWISE": [1, 2, 4, 8]}


def test_the_environment_can_force_a_runner() -> None:
    forced = CaptureConfig(
        sizes=(1, 2, 4, 8), num_speculative_tokens=1, spec_method="mtp", runner=runner_from_env("0")
    )
    assert forced.model_runner == "V1" and expected_capture_sizes(forced) == [2, 4, 8]
    assert runner_from_env("1") == "V2" and runner_from_env(None) is None


def test_rounding_leaves_the_query_length_when_nothing_fits() -> None:
    # 5 rounds up to 6, above the max (5); vLLM then keeps the query length itself.
    config = CaptureConfig(sizes=(5,), num_speculative_tokens=2, spec_method="ngram")
    assert expected_capture_sizes(config) == [3]


def test_default_max_above_the_largest_default_size_keeps_the_rounded_size() -> None:
    # max_num_seqs=1, k=2: max = 1 × 3 × 2 = 6, default sizes [1, 2, 4]; 4 rounds to 6 ≤ 6.
    config = CaptureConfig(max_num_seqs=1, num_speculative_tokens=2, spec_method="ngram")
    assert configured_capture_sizes(config) == [1, 2, 4]
    assert expected_capture_sizes(config) == [3, 6]


def test_graph_ceiling_in_sequences() -> None:
    ngram = CaptureConfig(sizes=(1, 2, 4, 8), max_num_seqs=32, num_speculative_tokens=2, spec_method="ngram")
    graphs = expected_graphs(ngram)
    assert graphs is not None and graph_ceiling_seqs(graphs, ngram.decode_query_len) == 2


def test_eager_captures_nothing() -> None:
    assert expected_capture_sizes(CaptureConfig(sizes=(1, 2), enforce_eager=True)) == []


def test_a_drafter_without_a_method_is_inferred_as_vllm_does() -> None:
    from launcher.profile.semantics import capture_config

    draft = capture_config({"speculative_config": {"model": "/models/draft", "num_speculative_tokens": 1}})
    assert (draft.spec_method, draft.model_runner) == ("draft_model", "V1")
    ngram = capture_config({"speculative_config": {"model": "[ngram]", "num_speculative_tokens": 2}})
    assert (ngram.spec_method, ngram.model_runner) == ("ngram", "V1")
    forced = capture_config({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}},
                            {"VLLM_USE_V2_MODEL_RUNNER": "0"})  # fmt: skip
    assert forced.model_runner == "V1"
