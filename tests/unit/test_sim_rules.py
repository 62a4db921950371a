"""Pure parts of the simulator: graph sizes, memory, parsing, tokenizer, prefix cache, spec decoding."""

from __future__ import annotations

import random

import pytest

from tests.simserver import TEST_SCHEMA
from vllm_flags.cudagraph_sizes import CaptureConfig, expected_graphs
from vllm_flags.schema import VllmSchema
from vllm_flags.sim_flags import SIM_FLAGS, env_default, sim_option_specs
from vllm_sim import cudagraph, tokenizer
from vllm_sim.config import StartupRefused, from_namespace
from vllm_sim.memory import plan_memory
from vllm_sim.prefix_cache import PrefixCache
from vllm_sim.serve_args import human_int, normalize_argv, parse
from vllm_sim.specdecode import SpecDecode
from vllm_sim.versions import DIALECTS

SCHEMA = VllmSchema.from_json(TEST_SCHEMA, origin="test")


def plan(**kw: object) -> cudagraph.GraphPlan:
    args: dict[str, object] = dict(
        optimization_level=2,
        compilation_config={},
        enforce_eager=False,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        spec_tokens=0,
        performance_mode=None,
        user_sizes=None,
        user_max=None,
    )
    args.update(kw)
    return cudagraph.plan_graphs(**args)  # type: ignore[arg-type]


def test_default_capture_sizes_are_51_up_to_512() -> None:
    p = plan()
    assert len(p.sizes) == 51 and p.sizes[:4] == (1, 2, 4, 8) and p.sizes[-1] == 512
    assert p.mode == cudagraph.GraphMode.FULL_AND_PIECEWISE
    assert len(p.piecewise_sizes) == 51 and len(p.full_sizes) == 51


def test_full_graphs_stop_at_max_num_seqs() -> None:
    p = plan(max_num_seqs=256)
    assert p.max_size == 512 and len(p.full_sizes) == 35  # vllm-facts.md §3.6: FULL limited to sizes <= 256


def test_user_sizes_are_deduplicated_sorted_and_filtered() -> None:
    p = plan(user_sizes=[8, 4, 4, 16384, 1], max_num_batched_tokens=8192)
    assert p.sizes == (1, 4, 8)
    assert "is overridden by config [1, 4, 8]" in p.warnings[0]


def test_inconsistent_max_size_is_refused() -> None:
    with pytest.raises(cudagraph.GraphConfigError, match=r"customized max_cudagraph_capture_size\(=64\)"):
        plan(user_sizes=[1, 2, 4], user_max=64)


def test_enforce_eager_and_o0_capture_nothing() -> None:
    assert plan(enforce_eager=True).sizes == ()
    assert plan(optimization_level=0).mode == cudagraph.GraphMode.NONE
    assert plan(optimization_level=1).mode == cudagraph.GraphMode.PIECEWISE


def test_capture_fallback_leaves_only_two_sizes_and_eager_big_batches() -> None:
    p = cudagraph.fallback_plan(plan())
    assert p.sizes == (1, 2) and p.covers(2) and not p.covers(4)


def test_memory_matches_the_sample_shape() -> None:
    m = plan_memory(
        model="Qwen/Qwen3-8B",
        total_gib=139.81,
        free_gib=35.12,
        util=0.92,
        tp=1,
        weights_override=15.27,
        bytes_per_token_override=None,
        kv_dtype="auto",
        mnbt=8192,
        graphs=102,
        block_size=16,
        max_model_len=40960,
    )
    assert m.bytes_per_token == 147456
    assert 100 < m.kv_gib < 115 and m.kv_tokens % 16 == 0
    assert m.free_memory_error(0) == (
        "ValueError: Free memory on device cuda:0 (35.12/139.81 GiB) on startup is less than desired GPU "
        "memory "
        "utilization (0.92, 128.63 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
        "other processes."
    )


def test_too_little_kv_for_max_model_len_is_refused() -> None:
    m = plan_memory(
        model="big-70B",
        total_gib=80,
        free_gib=None,
        util=0.95,
        tp=1,
        weights_override=None,
        bytes_per_token_override=None,
        kv_dtype="auto",
        mnbt=8192,
        graphs=0,
        block_size=16,
        max_model_len=131072,
    )
    assert m.kv_error() is not None and m.kv_error().startswith("ValueError: No available memory")  # type: ignore[union-attr]
    m2 = plan_memory(
        model="Qwen3-8B",
        total_gib=24,
        free_gib=None,
        util=0.9,
        tp=1,
        weights_override=None,
        bytes_per_token_override=None,
        kv_dtype="auto",
        mnbt=2048,
        graphs=0,
        block_size=16,
        max_model_len=131072,
    )
    assert "estimated maximum model length is" in (m2.kv_error() or "")


def test_argv_flexible_spellings() -> None:
    out = normalize_argv(
        ["--max_num_seqs", "8", "-O3", "-cc.cudagraph_mode=FULL", "--gpu_memory_utilization=0.5"], SCHEMA
    )
    assert out[:2] == ["--max-num-seqs", "8"] and out[2:4] == ["--optimization-level", "3"]
    assert "--gpu-memory-utilization=0.5" in out
    assert out[-2:] == ["-cc", '{"cudagraph_mode": "FULL"}']
    assert human_int("8k") == 8000 and human_int("8K") == 8192


def test_argv_dotted_keys_of_json_flags_gather_into_one_json_value() -> None:
    argv = ["-O", "2", "--compilation_config.max_cudagraph_capture_size", "8",
            "-cc.cudagraph_capture_sizes+=1,2", "--max-model-len.x=3", "--", "-x.y=1"]  # fmt: skip
    assert normalize_argv(argv, SCHEMA) == [
        "--optimization-level", "2", "--max-model-len.x=3", "--", "-x.y=1",
        "--compilation-config", '{"max_cudagraph_capture_size": 8}',
        "-cc", '{"cudagraph_capture_sizes": [1, 2]}',
    ]  # fmt: skip


def test_unknown_flag_fails_like_vllm(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["serve", "m", "--cuda-graph-sizes", "1"], SCHEMA, environ={})
    assert exc.value.code == 2
    assert "vllm: error: unrecognized arguments: --cuda-graph-sizes 1" in capsys.readouterr().err


def test_sim_flags_read_env_and_cli_wins() -> None:
    ns = parse(
        ["serve", "m", "--sim-speed", "3"], SCHEMA, environ={"VLLM_SIM_SPEED": "9", "VLLM_SIM_ORPHANS": "1"}
    )
    assert ns.sim_speed == 3.0 and ns.sim_orphans is True
    assert {s.option for s in sim_option_specs()} == {f.option for f in SIM_FLAGS}
    assert all(f.env.startswith("VLLM_SIM_") for f in SIM_FLAGS)
    assert env_default(SIM_FLAGS[1], {}) == 1.0


def test_tokenizer_round_trips_and_is_stable() -> None:
    text = "Hello, world 42! 你好世界"
    pieces = tokenizer.pieces(text)
    assert "".join(pieces) == text
    assert pieces[:3] == ["Hello", ",", " world"] and " 你" in pieces and " 4" in pieces
    assert tokenizer.encode(text) == tokenizer.encode(text)


def test_prefix_cache_hits_repeats_and_nested_prefixes() -> None:
    cache = PrefixCache(block_size=4, capacity_blocks=100)
    doc = list(range(40))
    assert cache.lookup(doc) == 0
    cache.insert(doc)
    assert cache.lookup(doc) == 36  # a fully cached prompt still recomputes its last block
    assert cache.lookup(doc[:20] + [999] * 20) == 20
    assert cache.lookup([7] + doc) == 0  # one changed token misses everything after it


def test_spec_decode_rate_depends_on_text_only() -> None:
    words = frozenset({"the", "river"})
    seq = ["the", "river", "rises", "every", "spring"] * 20

    def rate(tokens: list[str]) -> float:
        spec = SpecDecode("mtp", 3, 0.8)
        for i in range(len(tokens) - 4):
            spec.draft(tokens[i], tokens[i + 1 : i + 4], words)
        return spec.stats.accepted / spec.stats.draft_tokens

    assert rate(seq) == rate(list(seq))
    rng = random.Random(1)
    mixed = [rate([f"w{rng.randrange(10**6)}" for _ in range(100)]) for _ in range(5)]
    assert len(set(mixed)) > 1


def test_dialects_differ_where_the_real_026_run_says() -> None:
    # tests/data/real-vllm-0.26/: the old forms of vllm-facts.md §11 (EngineCore_DP0, `vLLM API server
    # version`, `Starting vLLM API server 0`, gpu_cache_* metrics) are not 0.26.0's.
    new, old = DIALECTS["0.33"], DIALECTS["0.26"]
    for dialect in (new, old):
        assert dialect.server_start_line("http://h:1") == "Starting vLLM server on http://h:1"
        assert dialect.engine_name == "EngineCore" and dialect.metric_kv_usage == "vllm:kv_cache_usage_perc"
    assert new.kv_one_line and not old.kv_one_line
    assert (new.runner_for("ngram"), old.runner_for("ngram"), old.runner_for("mtp")) == ("V2", "V1", "V2")
    assert old.model_loaded_line("V2", 0.001, 1.6024251) == "Model loading took 0.0 GiB and 1.602425 seconds"
    v1 = old.model_loaded_line("V1", 0.0, 0.259086)
    assert v1 == "Model loading took 0.0 GiB memory and 0.259086 seconds"
    assert new.model_loaded_line("V2", 1.5, 0.5) == "Model loading took 1.50 GiB memory and 0.500000 seconds"
    assert old.src("cg_done", "V1") == "gpu_model_runner.py:6844"
    assert old.src("cg_done", "V2") == "model_runner.py:747"


@pytest.mark.parametrize(
    ("method", "runner", "pieces", "fulls"),
    [
        ("mtp", "V2", (1, 2, 4, 8, 16, 32, 48, 64), (2, 4, 8, 16, 32, 48, 64)),
        ("eagle", "V2", (1, 2, 4, 8, 16, 32, 48, 64), (2, 4, 8, 16, 32, 48, 64)),
        ("draft_model", "V1", (2, 4, 8, 16, 32, 48, 64), (2, 4, 8, 16, 32, 48, 64)),
    ],
)
def test_026_captures_by_the_gates_rule_for_each_method(
    method: str, runner: str, pieces: tuple[int, ...], fulls: tuple[int, ...]
) -> None:
    """fable-27b's sizes with one speculative token: the simulator captures what the gate expects."""
    sizes = '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 48, 64]}'
    spec = f'{{"method": "{method}", "num_speculative_tokens": 1}}'
    argv = ["serve", "m", "--sim-vllm-version", "0.26", "-cc", sizes, "--max-num-seqs", "32"]
    argv += ["--speculative-config", spec]
    cfg = from_namespace(parse(argv, SCHEMA, environ={}), SCHEMA, environ={})
    assert cfg.runner == runner and cfg.graphs.sizes == (1, 2, 4, 8, 16, 32, 48, 64)
    assert (cfg.captured.piecewise_sizes, cfg.captured.full_sizes) == (pieces, fulls)
    config = CaptureConfig(
        sizes=cfg.graphs.sizes, max_num_seqs=32, num_speculative_tokens=1, spec_method=method
    )
    assert expected_graphs(config) == {"PIECEWISE": list(pieces), "FULL": list(fulls)}


def test_026_v1_runner_rounds_capture_sizes_after_the_config_line() -> None:
    """The real 0.26.0 tiny-ngram run: the config line kept [1, 2, 4, 8], the runner captured [3, 6]."""
    schema = SCHEMA
    args = ["serve", "m", "--sim-vllm-version", "0.26", "-cc", '{"cudagraph_capture_sizes": [1, 2, 4, 8]}']
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}']
    cfg = from_namespace(parse(args + spec, schema, environ={}), schema, environ={})
    assert cfg.runner == "V1" and cfg.graphs.sizes == (1, 2, 4, 8) and cfg.graphs.max_size == 8
    assert cfg.captured.sizes == (3, 6) and cfg.captured.max_size == 6
    assert (cfg.captured.piecewise_sizes, cfg.captured.full_sizes) == ((3, 6), (3, 6))
    plain = from_namespace(parse(args, schema, environ={}), schema, environ={})
    assert plain.runner == "V2" and plain.captured.sizes == (1, 2, 4, 8)
    new = from_namespace(parse(["serve", "m", *spec], schema, environ={}), schema, environ={})
    assert new.runner == "V2" and new.captured.sizes == new.graphs.sizes  # 0.33: no fallback, no rounding
    assert cudagraph.for_runner(cfg.graphs, "V1", 1).sizes == cfg.graphs.sizes  # k = 0: nothing to round


@pytest.mark.parametrize(
    ("argv", "last_line"),
    [
        (
            ["--enable-auto-tool-choice"],
            "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser",
        ),
        (
            ["--enable-auto-tool-choice", "--tool-call-parser", "hermess"],
            "KeyError: 'invalid tool call parser: hermess (chose from { apertus,beam,cohere_command3,",
        ),
        (["--reasoning-parser", "qwen4"], "KeyError: 'invalid reasoning parser: qwen4 (chose from {"),
        (
            ["--max-model-len", "64k"],
            "  Value error, User-specified max_model_len (64000) is greater than the derived",
        ),
        (
            ["--cudagraph-capture-sizes", "1", "2", "--max-cudagraph-capture-size", "8"],
            "ValueError: customized max_cudagraph_capture_size(=8) should be consistent",
        ),
    ],
)
def test_configurations_vllm_refuses_before_starting(argv: list[str], last_line: str) -> None:
    ns = parse(["serve", "Qwen/Qwen3-8B", *argv], SCHEMA, environ={})
    with pytest.raises(StartupRefused) as refused:
        from_namespace(ns, SCHEMA, environ={})
    assert refused.value.lines[-1].startswith(last_line)


def test_gpu_size_sets_vllm_batch_defaults() -> None:
    big = from_namespace(parse(["serve", "m"], SCHEMA, environ={}), SCHEMA, environ={})
    small = from_namespace(
        parse(["serve", "m", "--sim-gpu-memory-gib", "24"], SCHEMA, environ={}), SCHEMA, environ={}
    )
    assert (big.max_num_seqs, big.max_num_batched_tokens) == (1024, 8192)
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 2048)
    assert big.util == 0.92 and big.shown_args == {"model_tag": "m", "model": "m"}


def test_the_committed_snapshot_has_every_flag_the_simulator_reads() -> None:
    from tests.simserver import SNAPSHOT

    if not SNAPSHOT.exists():
        pytest.skip("no committed vLLM schema snapshot yet")
    from vllm_flags.schema import load_file

    real = load_file(SNAPSHOT)
    for option, spec in TEST_SCHEMA["options"].items():
        assert option in real.options, option
        assert real.options[option].dest == spec["dest"], option
    ns = parse(["serve", "m", "-O3", "--max_num_seqs", "8", "-cc.cudagraph_mode=FULL"], real, environ={})
    cfg = from_namespace(ns, real, environ={})
    assert cfg.max_num_seqs == 8 and cfg.graphs.mode == cudagraph.GraphMode.FULL


def test_simulator_doc_carries_the_generated_flag_table() -> None:
    from tests.conftest import REPO
    from vllm_flags.sim_flags import reference_markdown

    doc = (REPO / "docs" / "simulator.md").read_text(encoding="utf-8")
    assert reference_markdown() in doc, "regenerate docs/simulator.md's flag table (vllm_flags/sim_flags.py)"


def test_simulator_doc_maps_every_module_of_the_package() -> None:
    import re

    from tests.conftest import REPO

    doc = (REPO / "docs" / "simulator.md").read_text(encoding="utf-8")
    mapped = set(re.findall(r"^- `([a-z_0-9]+\.py)`: ", doc, re.MULTILINE))
    modules = {path.name for path in (REPO / "vllm_sim").glob("*.py")} - {"__init__.py"}
    assert mapped == modules, "docs/simulator.md's module map: one line per module of vllm_sim/"


def test_ballast_leak_is_linear_and_warmup_plateaus() -> None:
    from vllm_sim.ballast import Ballast

    leak = Ballast(leak_mib_per_min=60, warmup_mib=0, warmup_s=1)
    leak.start_leak(100.0)
    assert [leak.target_mib(100.0 + t) for t in (0, 30, 60, 120)] == [0, 30, 60, 120]
    warm = Ballast(leak_mib_per_min=0, warmup_mib=50, warmup_s=10)
    warm.start_leak(0.0)
    assert warm.target_mib(5.0) == 0  # nothing before traffic
    warm.start_warmup(5.0)
    grown = [warm.target_mib(5.0 + t) for t in (1, 5, 9.99, 10, 100)]
    assert grown[0] < grown[1] < grown[2] < 50 and grown[3] == grown[4] == 50


def test_step_time_follows_the_documented_formula() -> None:
    from vllm_sim.metrics import SimMetrics
    from vllm_sim.scheduler import Scheduler

    def cfg(*extra: str) -> object:
        return from_namespace(parse(["serve", "m", *extra], SCHEMA, environ={}), SCHEMA, environ={})

    gate = None  # step_seconds never steps: no engine core is needed
    base = Scheduler(cfg("--sim-speed", "2"), SimMetrics(), 1000, lambda job, reason: None, gate)  # type: ignore[arg-type]
    # (12 + 0.08 x 4) ms decode + 40 us x 1000 prefill tokens = 52.32 ms, at speed 2
    assert base.step_seconds(1000, 4, 4) == pytest.approx(0.05232 / 2)
    eager = Scheduler(cfg("--sim-capture-fallback"), SimMetrics(), 1000, lambda job, reason: None, gate)  # type: ignore[arg-type]
    assert eager.step_seconds(0, 2, 2) == pytest.approx(0.01216)
    assert eager.step_seconds(0, 4, 4) == pytest.approx((12 + 0.32) * 3 / 1000)  # past the [1, 2] graphs
    # --sim-slow-decode 4: the decode part of a step 4x as long, the prefill part as it was
    slow = Scheduler(cfg("--sim-slow-decode", "4"), SimMetrics(), 1000, lambda job, reason: None, gate)  # type: ignore[arg-type]
    assert slow.step_seconds(0, 1, 1) == pytest.approx((12 + 0.08) * 4 / 1000)
    assert slow.step_seconds(1000, 1, 1) - slow.step_seconds(0, 1, 1) == pytest.approx(0.04)


# ---- the prefix cache (docs/simulator.md "Prefix cache") ----------------------------------------


def test_only_full_blocks_are_cached() -> None:
    cache = PrefixCache(block_size=4, capacity_blocks=100)
    cache.insert(list(range(7)))  # one full block and three tokens
    assert len(cache) == 1
    assert cache.lookup(list(range(7)) + [99]) == 4


def test_the_least_recently_used_block_is_evicted_first_and_a_hit_refreshes_a_block() -> None:
    cache = PrefixCache(block_size=4, capacity_blocks=2)
    a, b, c = [1, 1, 1, 1, 0], [2, 2, 2, 2, 0], [3, 3, 3, 3, 0]
    cache.insert(a)
    cache.insert(b)
    assert cache.lookup(a) == 4  # a is now the most recently used
    cache.insert(c)
    assert len(cache) == 2
    assert (cache.lookup(a), cache.lookup(b), cache.lookup(c)) == (4, 0, 4), "b, the least recent, went"


def test_a_miss_in_the_middle_stops_the_hits_even_if_later_blocks_are_cached() -> None:
    cache = PrefixCache(block_size=2, capacity_blocks=100)
    cache.insert([1, 2, 3, 4, 5, 6, 0])
    assert cache.lookup([1, 2, 3, 4, 5, 6, 0]) == 6
    assert cache.lookup([1, 2, 9, 9, 5, 6, 0]) == 2, "block 3 hashes its parents: it misses after block 2"


def test_a_prompt_of_one_block_exactly_hits_nothing() -> None:
    """The last token is always computed: a prompt of exactly one block has no block to hit."""
    cache = PrefixCache(block_size=4, capacity_blocks=100)
    cache.insert([1, 2, 3, 4])
    assert cache.lookup([1, 2, 3, 4]) == 0 and cache.lookup([1, 2, 3, 4, 5]) == 4


def test_stale_blocks_spoil_only_the_prompts_that_hit_them_until_the_reset() -> None:
    cache = PrefixCache(block_size=4, capacity_blocks=100)
    old = [1, 2, 3, 4, 5]
    cache.insert(old)
    assert not cache.hits_stale(old), "nothing is stale before a sleep"
    cache.mark_stale()
    fresh = [7, 7, 7, 7, 7]
    cache.insert(fresh)
    assert cache.hits_stale(old) and not cache.hits_stale(fresh)
    assert not cache.hits_stale([9, 9, 9, 9, 9]), "a miss reads no stale block"
    cache.reset()
    assert len(cache) == 0 and not cache.hits_stale(old) and cache.lookup(old) == 0


def test_a_cache_of_no_capacity_keeps_one_block() -> None:
    cache = PrefixCache(block_size=4, capacity_blocks=0)
    cache.insert(list(range(12)))
    assert cache.capacity_blocks == 1 and len(cache) == 1


# ---- speculative decoding (docs/simulator.md "Speculative decoding") ---------------------------


def test_each_draft_position_is_accepted_only_after_the_ones_before_it() -> None:
    spec = SpecDecode("mtp", 4, 0.8)
    rng = random.Random(3)
    for _ in range(300):
        tokens = [f"w{rng.randrange(50)}" for _ in range(5)]
        accepted = spec.draft(tokens[0], tokens[1:], frozenset())
        assert 0 <= accepted <= 4
    per_position = spec.stats.per_position
    assert per_position == sorted(per_position, reverse=True), "position i+1 needs position i accepted"
    assert spec.stats.accepted == sum(per_position)
    assert (spec.stats.drafts, spec.stats.draft_tokens) == (300, 1200)


def test_a_drafter_never_accepts_more_than_its_k_tokens_or_than_there_are() -> None:
    spec = SpecDecode("mtp", 2, 1.0)
    assert spec.draft("a", [",", ".", ";", "!"], frozenset()) <= 2
    assert spec.draft("a", [","], frozenset()) <= 1
    assert spec.draft("a", [], frozenset()) == 0
    assert spec.stats.draft_tokens == 6, "k tokens are drafted each step, whatever is accepted"


def test_an_acceptance_of_zero_accepts_nothing() -> None:
    spec = SpecDecode("ngram", 3, 0.0)
    assert spec.draft("the", ["river", "rises", "again"], frozenset({"river", "rises", "again"})) == 0


@pytest.mark.parametrize(
    ("method", "token", "prompt", "factor"),
    [
        ("ngram", " river", {"river"}, 1.0),  # in the prompt
        ("ngram", " river", {"sea"}, 0.25),
        ("ngram_gpu", "sea", {"sea"}, 1.0),
        ("mtp", ",", set(), 1.0),  # one character
        ("mtp", " ", set(), 1.0),  # nothing but a space
        ("eagle", " river", set(), 0.85),  # a word
        ("draft_model", "河", set(), 0.7),  # CJK
        ("mtp", "河流", set(), 0.7),
    ],
)
def test_the_acceptance_factor_of_a_token_by_drafting_method(
    method: str, token: str, prompt: set[str], factor: float
) -> None:
    assert SpecDecode(method, 1, 0.8)._factor(token, frozenset(prompt)) == factor


def test_ngram_drafting_accepts_more_of_what_the_prompt_holds() -> None:
    words = [f"w{i}" for i in range(200)]

    def rate(prompt: frozenset[str]) -> float:
        spec = SpecDecode("ngram", 2, 0.8)
        for i in range(len(words) - 3):
            spec.draft(words[i], words[i + 1 : i + 3], prompt)
        return spec.stats.accepted / spec.stats.draft_tokens

    assert rate(frozenset(words)) > 2 * rate(frozenset())


# ---- the toy tokenizer (docs/simulator.md "Text") ----------------------------------------------


def test_a_chat_template_marker_is_one_token_with_its_reserved_id() -> None:
    pieces = tokenizer.pieces("<|im_start|>user\nhi<|im_end|>")
    assert pieces == ["<|im_start|>", "user", "\nhi", "<|im_end|>"]
    ids = tokenizer.encode("<|im_start|><|im_end|><|endoftext|>")
    assert ids == [tokenizer.SPECIAL_BASE, tokenizer.SPECIAL_BASE + 1, tokenizer.SPECIAL_BASE + 2]


def test_digits_and_cjk_characters_are_one_token_each_and_words_one_each() -> None:
    assert tokenizer.count("2026") == 4
    assert tokenizer.count("你好世界") == 4
    assert tokenizer.count("hello world") == 2
    assert tokenizer.pieces("café") == ["caf", "é"], "a letter outside A-Z is a token of its own"


def test_trailing_whitespace_stays_with_the_last_piece_and_blank_text_has_no_tokens() -> None:
    assert tokenizer.pieces("hi  \n") == ["hi  \n"]
    assert tokenizer.pieces("   ") == [] and tokenizer.count("") == 0


def test_ids_ignore_leading_whitespace_and_stay_below_the_special_range() -> None:
    assert tokenizer.encode("word")[0] == tokenizer.encode(" word")[0]
    ids = tokenizer.encode("The quick brown fox jumps over the lazy dog 0123456789 !?")
    assert all(0 <= i < tokenizer.VOCAB for i in ids)


# ---- CUDA graphs as the simulator plans them ---------------------------------------------------


def test_the_mode_given_wins_whatever_its_case_and_an_unknown_one_is_refused() -> None:
    assert plan(compilation_config={"cudagraph_mode": "piecewise"}).mode == cudagraph.GraphMode.PIECEWISE
    assert plan(optimization_level=0, compilation_config={"cudagraph_mode": "FULL"}).mode == (
        cudagraph.GraphMode.FULL
    )
    with pytest.raises(cudagraph.GraphConfigError, match="Invalid cudagraph_mode: 'SOMETIMES'"):
        plan(compilation_config={"cudagraph_mode": "SOMETIMES"})


def test_a_mode_of_none_captures_no_default_sizes_and_o0_does_not_compile() -> None:
    none = plan(compilation_config={"cudagraph_mode": "NONE"})
    assert (none.sizes, none.max_size) == ((), 0)
    assert plan(optimization_level=0).compile_mode == 0 and plan().compile_mode == 3


def test_the_default_max_size_is_twice_the_decode_batch_capped_at_512_and_the_token_budget() -> None:
    assert plan(max_num_seqs=8).max_size == 16
    assert plan(max_num_seqs=8, spec_tokens=2).max_size == 48, "twice 8 sequences of 3 tokens"
    capped = plan(max_num_seqs=1024, max_num_batched_tokens=256)
    assert capped.max_size == 256 and capped.warnings == ("Truncating max_cudagraph_capture_size to 256",)
    assert plan(max_num_seqs=1024).max_size == 512


def test_the_engine_config_line_shows_the_modes_enum_value() -> None:
    assert {m.value: m.enum_value for m in cudagraph.GraphMode} == {
        "NONE": "0",
        "PIECEWISE": "1",
        "FULL": "2",
        "FULL_DECODE_ONLY": "(2, 0)",
        "FULL_AND_PIECEWISE": "(2, 1)",
    }


def test_the_v1_runner_rounds_the_sizes_for_ngram_and_the_v2_runner_keeps_them() -> None:
    """tiny-ngram.log (vLLM 0.26.0, k = 2): sizes [1, 2, 4, 8] printed, [3, 6] captured."""
    given = plan(user_sizes=[1, 2, 4, 8], max_num_seqs=2, spec_tokens=2)
    v1 = cudagraph.for_runner(given, "V1", 3)
    assert (v1.sizes, v1.max_size, v1.piecewise_sizes, v1.full_sizes) == ((3, 6), 6, (3, 6), (3, 6))
    v2 = cudagraph.for_runner(given, "V2", 3)
    assert v2.sizes == (1, 2, 4, 8) and v2.max_size == 8 and v2.piecewise_sizes == (1, 2, 4, 8)
    assert v2.full_sizes == (3, 6), "V2 rounds only its FULL decode graphs, up to max_num_seqs x 3"


def test_the_eager_fault_drops_every_graph_and_compilation() -> None:
    eager = cudagraph.eager_plan(plan())
    assert (eager.mode, eager.sizes, eager.max_size, eager.compile_mode) == (
        cudagraph.GraphMode.NONE,
        (),
        0,
        0,
    )
    assert not eager.covers(1)
