"""The simulator's startup decisions (`vllm_sim/config.py`): each refusal and each resolved value,
from a parsed command line, without starting anything."""

from __future__ import annotations

import pytest

from vllm_flags.schema import load_snapshot
from vllm_sim import cudagraph
from vllm_sim.config import SimConfig, StartupRefused, from_namespace
from vllm_sim.serve_args import parse

SCHEMA = load_snapshot()


def config(*argv: str, env: dict[str, str] | None = None) -> SimConfig:
    ns = parse(["serve", "Qwen/Qwen3-8B", *argv], SCHEMA, environ={})
    return from_namespace(ns, SCHEMA, environ=env or {})


def refusal(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(StartupRefused) as refused:
        config(*argv, env=env)
    return refused.value.lines


@pytest.mark.parametrize(
    ("argv", "seqs", "tokens"),
    [
        (["--sim-gpu-memory-gib", "24"], 256, 2048),
        (["--sim-gpu-memory-gib", "80"], 1024, 8192),
        (["--sim-gpu-memory-gib", "192"], 1024, 16384),
        (["--sim-gpu-memory-gib", "24", "--performance-mode", "throughput"], 512, 4096),
        (["--max-num-batched-tokens", "128"], 128, 128),  # the sequences never outnumber the tokens
        (["--max-num-batched-tokens", "4k", "--max-num-seqs", "8"], 8, 4000),
    ],
)
def test_batch_limits_follow_the_gpu_unless_given(argv: list[str], seqs: int, tokens: int) -> None:
    cfg = config(*argv)
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (seqs, tokens)


def test_max_model_len_is_the_models_unless_asked_and_longer_only_when_allowed() -> None:
    assert config().max_model_len == 40960
    assert config("--max-model-len", "-1").max_model_len == 40960
    assert config("--max-model-len", "8k").max_model_len == 8000
    lines = refusal("--max-model-len", "50000")
    assert "User-specified max_model_len (50000) is greater than" in lines[-1]
    allowed = config("--max-model-len", "50000", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert allowed.max_model_len == 50000


def test_speculative_config_gives_method_and_tokens() -> None:
    mtp = config("--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}')
    assert (mtp.spec_method, mtp.spec_tokens) == ("mtp", 3)
    short = config("--spec-method", "eagle")
    assert (short.spec_method, short.spec_tokens) == ("eagle", 1)  # one token when the method alone is given
    assert (config().spec_method, config().spec_tokens) == (None, 0)


def test_a_json_flag_that_is_not_json_is_refused() -> None:
    assert refusal("-cc", "{not json")[-1].startswith("vllm: error: argument value is not valid JSON")


def test_parser_refusals_033_before_the_banner_026_after_it() -> None:
    assert refusal("--enable-auto-tool-choice")[-1] == (
        "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"
    )
    assert refusal("--enable-auto-tool-choice", "--tool-call-parser", "nope")[-1].startswith(
        "KeyError: 'invalid tool call parser: nope"
    )
    late = config("--sim-vllm-version", "0.26", "--enable-auto-tool-choice", "--tool-call-parser", "nope")
    assert late.refusal is not None and late.refusal[0] == "tool call"
    reasoning = config("--sim-vllm-version", "0.26", "--reasoning-parser", "nope")
    assert reasoning.refusal is not None and reasoning.refusal[0] == "reasoning"
    assert reasoning.refusal[1].startswith("KeyError: \"Reasoning parser 'nope' not found.")
    fine = config("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3")
    assert (fine.tool_parser, fine.auto_tools, fine.reasoning_parser, fine.refusal) == (
        "hermes",
        True,
        "qwen3",
        None,
    )
    assert fine.reasoning and config("--sim-reasoning").reasoning and not config().reasoning


def test_capture_faults_change_the_plan_after_the_rule() -> None:
    assert config("--sim-capture-fallback").graphs.sizes == (1, 2)
    eager = config("--sim-eager-fallback")
    assert eager.graphs.mode == cudagraph.GraphMode.NONE and not eager.enforce_eager
    assert config("--enforce-eager").enforce_eager
    assert refusal("--cudagraph-capture-sizes", "1", "2", "--max-cudagraph-capture-size", "8")[-1].startswith(
        "ValueError: customized max_cudagraph_capture_size(=8)"
    )


@pytest.mark.parametrize("flag", ["--sim-speed", "--sim-startup-speed"])
def test_a_speed_that_is_not_positive_is_refused(flag: str) -> None:
    assert refusal(flag, "0") == ["vllm: error: --sim-speed and --sim-startup-speed must be > 0"]


def test_frontend_settings() -> None:
    env = {"VLLM_API_KEY": "from-env"}
    assert config(env=env).api_keys == ("from-env",)
    assert config("--api-key", "a", "b", env=env).api_keys == ("a", "b")  # the flag wins
    assert config().api_keys == ()
    cfg = config("--served-model-name", "x", "y", "--disable-access-log-for-endpoints", "/health,/metrics")
    assert cfg.served_names == ("x", "y") and cfg.access_log_skip == ("/health", "/metrics")
    assert config().served_names == ("Qwen/Qwen3-8B",) and config().port == 8000
    assert not config("--disable-log-stats").log_stats and config().log_stats


def test_the_http_servers_settings_are_vllms() -> None:
    """uvicorn's keep-alive from VLLM_HTTP_TIMEOUT_KEEP_ALIVE (int(), 5) and h11's head bound from
    `--h11-max-incomplete-event-size` (4 MiB) (vllm-facts.md §15); a non-integer variable stops vLLM."""
    assert (config().keep_alive_s, config().h11_max_event_bytes) == (5.0, 4194304)
    cfg = config("--h11-max-incomplete-event-size", "65536", env={"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "30"})
    assert (cfg.keep_alive_s, cfg.h11_max_event_bytes) == (30.0, 65536)
    lines = refusal(env={"VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "5s"})
    assert lines == ["ValueError: invalid literal for int() with base 10: '5s'"]


def test_engine_settings() -> None:
    cfg = config("--kv-cache-memory-bytes", "2g", "--gpu-memory-utilization", "0.5", "-tp", "2")
    assert (cfg.kv_cache_memory_bytes, cfg.util, cfg.tp) == (2_000_000_000, 0.5, 2)
    assert config().util == 0.92 and config("--sim-vllm-version", "0.26").util == 0.9
    assert not config("--no-enable-prefix-caching").prefix_caching and config().prefix_caching
