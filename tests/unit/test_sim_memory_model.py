"""The simulator's GPU memory model (`vllm_sim/memory.py`): the model size it reads from a name, what is
left for the KV cache and how many tokens that holds, and the two refusals vLLM makes of too little
memory, in vLLM's words (vllm-facts.md §5.2; the real free-memory.log and kv-small runs).
"""

from __future__ import annotations

from typing import Any

import pytest

from vllm_sim.memory import CONTEXT_GIB, GIB, MemoryPlan, params_b, plan_memory, weights_gib
from vllm_sim.versions import V026, V033


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("Qwen/Qwen3-8B", 8.0),
        ("meta-llama/Llama-3.3-70B-Instruct", 70.0),
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.5),
        ("google/gemma-3-27b-it", 27.0),
        ("/models/Qwen3-9B-AWQ", 9.0),
        # mixture-of-experts names give the total before the active count: every expert is loaded
        ("Qwen/Qwen3-30B-A3B-FP8", 30.0),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", 80.0),
        ("Qwen/Qwen3-235B-A22B-FP8", 235.0),
        ("/root/tiny", None),
        ("deepseek-ai/DeepSeek-V3", None),
    ],
)
def test_the_size_is_read_from_the_models_name(model: str, params: float | None) -> None:
    assert params_b(model) == params


def test_the_directory_part_of_a_path_says_nothing_about_the_size() -> None:
    assert params_b("/data/70B-models/tiny") is None


def test_a_moe_models_weights_are_all_its_experts_as_the_real_load_showed() -> None:
    """tests/data/logs/eager_gb10_no_separators.log: Qwen3-Next-80B-A3B-Instruct, `Model loading took
    148.22 GiB memory` in bf16."""
    assert weights_gib("Qwen/Qwen3-Next-80B-A3B-Instruct", None) == pytest.approx(148.22, rel=0.01)


@pytest.mark.parametrize(
    ("model", "factor"),
    [
        ("Qwen/Qwen3-8B", 1.0),
        ("Qwen/Qwen3-8B-FP8", 0.5),
        ("Qwen/Qwen3-8B-AWQ", 0.28),
        ("x/Llama-8B-GPTQ-Int4", 0.28),
    ],
)
def test_quantized_names_weigh_less(model: str, factor: float) -> None:
    assert weights_gib(model, None) == pytest.approx(8e9 * 2 / GIB * factor)


def test_given_weights_win_and_an_unknown_size_weighs_one_gib() -> None:
    assert weights_gib("Qwen/Qwen3-8B", 3.5) == 3.5
    assert weights_gib("/root/tiny", None) == 1.0


def plan(**overrides: Any) -> MemoryPlan:
    args: dict[str, Any] = {
        "model": "Qwen/Qwen3-8B",
        "total_gib": 80.0,
        "free_gib": None,
        "util": 0.9,
        "tp": 1,
        "weights_override": None,
        "bytes_per_token_override": None,
        "kv_dtype": "auto",
        "mnbt": 8192,
        "graphs": 102,
        "block_size": 16,
        "max_model_len": 40960,
    }
    args.update(overrides)
    return plan_memory(**args)


def test_the_kv_cache_is_what_is_left_of_the_requested_share() -> None:
    m = plan()
    assert m.requested_gib == pytest.approx(72.0)
    assert m.kv_gib == pytest.approx(72.0 - m.weights_gib - m.activation_gib - m.graph_gib - CONTEXT_GIB)
    assert m.bytes_per_token == 147456  # 18432 x 8: Qwen3-8B's 36 layers x 8 KV heads x 128 x 2 x 2 bytes


def test_kv_tokens_are_whole_blocks() -> None:
    for block in (16, 32, 128):
        m = plan(block_size=block)
        assert m.kv_tokens % block == 0 and m.num_blocks == m.kv_tokens // block
        assert (m.kv_tokens + block) * m.bytes_per_token > m.kv_gib * GIB  # no room for one more block


def test_an_fp8_kv_cache_holds_twice_the_tokens() -> None:
    plain, fp8 = plan(), plan(kv_dtype="fp8_e4m3")
    assert fp8.bytes_per_token == plain.bytes_per_token // 2
    assert fp8.kv_tokens == pytest.approx(2 * plain.kv_tokens, abs=16)


def test_tensor_parallel_splits_weights_and_each_ranks_kv_bytes() -> None:
    one, four = plan(), plan(tp=4)
    assert four.weights_gib == pytest.approx(one.weights_gib / 4)
    assert four.kv_tokens > 4 * one.kv_tokens  # a rank holds a quarter of each token, and has more room


def test_eager_captures_no_graph_memory() -> None:
    assert plan(graphs=0).graph_gib == 0.0
    assert plan(graphs=102).graph_gib == pytest.approx(0.006 * 102)


def test_a_given_kv_size_skips_the_budget() -> None:
    """`--kv-cache-memory-bytes`: vLLM skips profiling and uses that size (0.26.0 gpu_worker.py:479)."""
    m = plan(kv_bytes=2 * GIB, util=0.1)
    assert m.kv_gib == 2.0 and m.kv_tokens == 2 * GIB // 147456 // 16 * 16


def test_too_little_free_memory_is_refused_as_the_real_run_was() -> None:
    """free-memory.log: 18.77 of 139.8 GiB free for 0.2 of it; 0.26.0 prints GiB by `format_gib`."""
    m = plan(model="/root/tiny", total_gib=139.8, free_gib=18.77, util=0.2)
    assert m.free_memory_error(0, V026.gib) == (
        "ValueError: Free memory on device cuda:0 (18.77/139.8 GiB) on startup is less than desired GPU "
        "memory utilization (0.2, 27.96 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
        "other processes."
    )
    assert "(18.77/139.80 GiB)" in (m.free_memory_error(3, V033.gib) or "")
    assert "cuda:3" in (m.free_memory_error(3) or "")


def test_enough_free_memory_is_no_refusal() -> None:
    assert plan(free_gib=72.0).free_memory_error(0) is None
    assert plan(free_gib=None).free_memory_error(0) is None  # all of it free


def test_no_room_at_all_for_the_cache_is_vllms_no_cache_blocks_error() -> None:
    m = plan(weights_override=75.0)
    assert m.kv_gib <= 0 and m.kv_tokens == 0
    assert (m.kv_error() or "").startswith("ValueError: No available memory for the cache blocks.")


def test_a_cache_too_small_for_one_full_request_says_what_it_would_take() -> None:
    m = plan(kv_bytes=16 * 147456 * 100, max_model_len=40960)  # 1,600 tokens of room
    error = m.kv_error() or ""
    assert error.startswith(
        "ValueError: To serve at least one request with the model's max seq len (40960), "
    )
    assert (
        "(5.62 GiB KV cache is needed, which is larger than the available KV cache memory (0.22 GiB)."
        in error
    )
    assert "the estimated maximum model length is 1600." in error


def test_a_cache_of_less_than_one_block_estimates_nothing() -> None:
    m = plan(kv_bytes=147456 * 4)  # four tokens: not one block of 16
    assert m.kv_tokens == 0 and m.kv_gib > 0
    error = m.kv_error() or ""
    assert "Based on the available memory" not in error and "max seq len (40960)" in error


def test_a_cache_that_holds_one_full_request_is_enough() -> None:
    m = plan(kv_bytes=147456 * 40960)
    assert m.kv_tokens == 40960 and m.kv_error() is None and m.concurrency == 1.0


@pytest.mark.parametrize(
    ("model", "params"),
    [
        ("org/Model-1.5b-chat", 1.5),  # a lower-case b
        ("org/Model-7B", 7.0),
        ("org/Model-13Bx", None),  # a letter right after the B: not a size
        ("org/v2.5-Model", None),  # a version number is no size
        ("org/Model-3B-v1.5", 3.0),
        ("org/Mixtral-8x7B", 7.0),  # the larger figure; no arithmetic on the name
    ],
)
def test_more_sizes_read_from_names(model: str, params: float | None) -> None:
    assert params_b(model) == params


def test_activations_grow_with_the_token_budget_and_the_model_and_split_across_ranks() -> None:
    """0.2 + (mnbt / 8192) x (0.4 + 0.08 x params_B) / TP (docs/simulator.md "Memory model")."""
    assert plan(mnbt=8192).activation_gib == pytest.approx(0.2 + 1.0 * (0.4 + 0.64))
    assert plan(mnbt=16384).activation_gib == pytest.approx(0.2 + 2.0 * (0.4 + 0.64))
    assert plan(mnbt=8192, tp=2).activation_gib == pytest.approx(0.2 + (0.4 + 0.64) / 2), (
        "the 0.2 is per rank"
    )


def test_graph_memory_grows_with_the_square_root_of_the_size_above_8b_only() -> None:
    assert plan(model="org/M-32B").graph_gib == pytest.approx(0.006 * 102 * 2.0)  # sqrt(32 / 8)
    assert plan(model="org/M-0.5B").graph_gib == pytest.approx(0.006 * 102), "no smaller than an 8 B model's"
    assert plan(model="org/unnamed").graph_gib == pytest.approx(0.006 * 102)


@pytest.mark.parametrize(
    ("kv_dtype", "halved"),
    [("int8", True), ("nvfp4", True), ("fp8", True), ("bfloat16", False), ("auto", False)],
)
def test_quantized_kv_caches_halve_the_bytes_per_token(kv_dtype: str, halved: bool) -> None:
    assert plan(kv_dtype=kv_dtype).bytes_per_token == (147456 // 2 if halved else 147456)


def test_a_given_bytes_per_token_wins_over_the_name_and_is_still_halved_for_fp8() -> None:
    assert plan(bytes_per_token_override=1000).bytes_per_token == 1000
    assert plan(bytes_per_token_override=1000, kv_dtype="fp8").bytes_per_token == 500


def test_the_requested_share_and_the_concurrency_follow_the_documented_formula() -> None:
    m = plan(total_gib=139.8, util=0.5, max_model_len=4096)
    assert m.requested_gib == pytest.approx(69.9)
    assert m.concurrency == m.kv_tokens / 4096
    assert m.free_gib == 139.8, "no --sim-free-memory-gib: the whole card is free"
