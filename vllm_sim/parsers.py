"""Tool-call and reasoning parser names per vLLM release (vllm-facts.md §7), for startup checks: 0.33's
are the flag snapshot's (vllm_flags.registered_parsers), 0.26's are listed here."""

from __future__ import annotations

from vllm_flags.registered_parsers import REASONING_PARSERS_IN_ORDER, TOOL_PARSERS_IN_ORDER

TOOL_PARSERS, REASONING_PARSERS = TOOL_PARSERS_IN_ORDER, REASONING_PARSERS_IN_ORDER


# vLLM 0.26.0's registries (`tool_parsers/__init__.py` _TOOL_PARSERS_TO_REGISTER, 44 names;
# `reasoning/__init__.py` _REASONING_PARSERS_TO_REGISTER, 28), listed by `list_registered()`.
TOOL_PARSERS_026: tuple[str, ...] = tuple(
    [
        "apertus",
        "cohere_command3",
        "cohere_command4",
        "deepseek_v3",
        "deepseek_v31",
        "deepseek_v32",
        "deepseek_v4",
        "ernie45",
        "functiongemma",
        "gemma4",
        "gigachat3",
        "glm45",
        "glm47",
        "granite",
        "granite-20b-fc",
        "granite4",
        "hermes",
        "hunyuan_a13b",
        "hy_v3",
        "inkling",
        "internlm",
        "jamba",
        "kimi_k2",
        "lfm2",
        "llama3_json",
        "llama4_json",
        "llama4_pythonic",
        "longcat",
        "mimo",
        "minicpm5",
        "minimax_m2",
        "minimax_m3",
        "mistral",
        "olmo3",
        "openai",
        "phi4_mini_json",
        "poolside_v1",
        "pythonic",
        "qwen3_coder",
        "qwen3_xml",
        "seed_oss",
        "step3",
        "step3p5",
        "xlam",
    ]
)
REASONING_PARSERS_026: tuple[str, ...] = tuple(
    [
        "cohere_command3",
        "cohere_command4",
        "deepseek_r1",
        "deepseek_v3",
        "deepseek_v4",
        "ernie45",
        "gemma4",
        "glm45",
        "glm47",
        "granite",
        "holo2",
        "hunyuan_a13b",
        "hy_v3",
        "inkling",
        "kimi_k2",
        "mimo",
        "minimax_m2",
        "minimax_m2_append_think",
        "minimax_m3",
        "mistral",
        "nemotron_v3",
        "olmo3",
        "openai_gptoss",
        "poolside_v1",
        "qwen3",
        "seed_oss",
        "step3",
        "step3p5",
    ]
)


def parsers_for(version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(tool-call parsers, reasoning parsers) the vLLM version registers."""
    if version == "0.26":
        return TOOL_PARSERS_026, REASONING_PARSERS_026
    return TOOL_PARSERS, REASONING_PARSERS


def unknown_reasoning_026(name: str) -> str:
    """0.26.0 looks the reasoning parser up while it builds the engine config (the real run):
    `abs_reasoning_parsers.py:245`, a KeyError whose message holds quotes, so Python shows it in \"."""
    names = ", ".join(sorted(REASONING_PARSERS_026))
    return f"KeyError: \"Reasoning parser '{name}' not found. Available parsers: {names}\""


def unknown_parser_error(kind: str, name: str, known: tuple[str, ...]) -> str:
    """`KeyError: 'invalid tool call parser: X (chose from { a,b,... })'` as vLLM raises it."""
    return f"KeyError: 'invalid {kind} parser: {name} (chose from {{ {','.join(sorted(known))} }})'"
