"""vLLM's capture-size rule (config/vllm.py, config/compilation.py), checked on known configurations."""

from __future__ import annotations

from gates.cudagraph_sizes import CaptureConfig, decode_reachable, expected_capture_sizes


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


def test_mtp_one_rounds_to_even_sizes_seven_graphs() -> None:
    # fable-27b in the field: [1,2,4,8,16,32,48,64] with MTP 1 → "decode graph 7/7".
    config = CaptureConfig(sizes=(1, 2, 4, 8, 16, 32, 48, 64), max_num_seqs=32, num_speculative_tokens=1)
    sizes = expected_capture_sizes(config)
    assert sizes == [2, 4, 8, 16, 32, 48, 64]
    assert decode_reachable(sizes, config) == (sizes, [])


def test_ngram_two_tokens_rounds_up_to_multiples_of_three() -> None:
    config = CaptureConfig(sizes=(1, 2, 4, 8), num_speculative_tokens=2)
    assert expected_capture_sizes(config) == [3, 6]


def test_rounding_leaves_the_query_length_when_nothing_fits() -> None:
    # 5 rounds up to 6, above the max (5); vLLM then keeps the query length itself.
    config = CaptureConfig(sizes=(5,), num_speculative_tokens=2)
    assert expected_capture_sizes(config) == [3]


def test_eager_captures_nothing() -> None:
    assert expected_capture_sizes(CaptureConfig(sizes=(1, 2), enforce_eager=True)) == []
