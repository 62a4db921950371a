"""The simulated model's text: smoke-check answers, tool gating and calls, token plans, metrics text."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from vllm_sim.answers import compose
from vllm_sim.generation import Channel, build_plan
from vllm_sim.metrics import SimMetrics
from vllm_sim.metrics_text import MetricsText
from vllm_sim.toolcalls import (
    RequestInvalid,
    apply_fault,
    check_server_support,
    plan_calls,
    validate_tool_usage,
)
from vllm_sim.versions import DIALECTS

REPO = Path(__file__).resolve().parents[2]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "required": ["city", "days"],
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def answer(q: str, prompt: str | None = None, seed: int = 1) -> str:
    return compose(prompt or q, q, random.Random(seed), reasoning=False, degenerate=False).content


def test_smoke_answers() -> None:
    assert "42" in answer("What is 17 + 25?")
    assert "Z7Q-41" in answer(
        "What is the secret code?", "Remember: the secret code is Z7Q-41. Now, what is the secret code?"
    )
    assert "XK9" in answer("密码是多少？", "仓库的密码是XK9。请问密码是多少？")
    zh = answer("请介绍一下河流。")
    assert sum("\u4e00" <= c <= "\u9fff" for c in zh) > 10
    assert "def reverse_string" in answer("Write a Python function to reverse a string")
    assert answer("say hello") == "Hello!"
    assert answer("Tell me about bread", seed=3) == answer("Tell me about bread", seed=3)


def test_reasoning_comes_first_and_max_tokens_can_starve_the_answer() -> None:
    a = compose("q", "What is 2 + 2?", random.Random(0), reasoning=True, degenerate=False)
    assert a.reasoning and "4" in a.content
    short = build_plan(
        a,
        [],
        max_tokens=5,
        min_tokens=0,
        ignore_eos=False,
        stop=[],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    assert short.finish_reason == "length" and all(t.channel == Channel.REASONING for t in short.tokens)


def test_plan_lengths_stop_and_ignore_eos() -> None:
    a = compose("q", "What is 17 + 25?", random.Random(0), reasoning=False, degenerate=False)
    natural = build_plan(
        a,
        [],
        max_tokens=100,
        min_tokens=0,
        ignore_eos=False,
        stop=[],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    assert natural.finish_reason == "stop" and natural.tokens[-1].text == ""  # the EOS counts
    forced = build_plan(
        a,
        [],
        max_tokens=50,
        min_tokens=0,
        ignore_eos=True,
        stop=[],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    assert len(forced.tokens) == 50 and forced.finish_reason == "length"
    exact = build_plan(
        a,
        [],
        max_tokens=len(natural.tokens) - 1,
        min_tokens=0,
        ignore_eos=False,
        stop=[],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    assert exact.finish_reason == "length"  # no room left for the EOS
    stopped = build_plan(
        a,
        [],
        max_tokens=100,
        min_tokens=0,
        ignore_eos=False,
        stop=["="],
        rng=random.Random(0),
        lang="en",
        named_call=False,
    )
    assert stopped.stop_reason == "=" and "42" not in "".join(t.text for t in stopped.tokens)


def test_tool_request_validation_messages() -> None:
    with pytest.raises(RequestInvalid, match="`tools` must not be an empty array"):
        validate_tool_usage({"tools": []})
    with pytest.raises(RequestInvalid, match="When using `tool_choice`, `tools` must be set."):
        validate_tool_usage({"tool_choice": "auto"})
    with pytest.raises(RequestInvalid, match="does not match any of the specified `tools`"):
        validate_tool_usage(
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}}
        )
    body: dict[str, Any] = {"tools": [WEATHER]}  # a JSON body: the validator fills tool_choice in
    validate_tool_usage(body)
    assert body["tool_choice"] == "auto"


def test_server_gate_messages() -> None:
    assert check_server_support("auto", False, False) == (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )
    assert (
        check_server_support("required", False, False)
        == 'tool_choice="required" requires --tool-call-parser to be set'
    )
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert check_server_support(named, False, False) == (
        'tool_choice=function "get_weather" requires --tool-call-parser to be set'
    )
    assert (
        check_server_support("auto", True, True) is None
        and check_server_support("none", False, False) is None
    )


def test_calls_pick_a_fitting_tool_with_typed_arguments() -> None:
    calls = plan_calls(
        [SEARCH, WEATHER], "auto", "What's the weather in Paris for 3 days?", "user", random.Random(0)
    )
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].id.startswith("chatcmpl-tool-")
    args = json.loads(calls[0].arguments)
    assert args == {"city": "Paris", "days": 3}
    assert plan_calls([WEATHER], "auto", "say hello", "user", random.Random(0)) == []
    assert plan_calls([WEATHER], "required", "say hello", "user", random.Random(0))[0].name == "get_weather"
    assert plan_calls([WEATHER], "auto", "thanks", "tool", random.Random(0)) == []


def test_tool_faults() -> None:
    calls = plan_calls([WEATHER], "required", "weather in Oslo", "user", random.Random(0))
    with pytest.raises(json.JSONDecodeError):
        json.loads(apply_fault(calls, "malformed")[0].arguments)
    assert apply_fault(calls, "wrong-name")[0].name not in ("get_weather",)


def test_metrics_text_uses_dialect_names_and_labels() -> None:
    m = SimMetrics()
    m.prompt_tokens = 12
    m.ttft.observe(0.03)
    text = MetricsText(DIALECTS["0.33"], "qwen", {"block_size": "16"}).render(
        m, (2, 6, 4, [2, 1, 1]), tool_parser=False
    )
    assert 'vllm:prompt_tokens_total{engine="0",model_name="qwen"} 12.0' in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",model_name="qwen",le="0.04"} 1.0' in text
    assert (
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="qwen",position="2"} 1.0'
        in text
    )
    assert text.count("# TYPE vllm:request_success counter") == 1
    # 0.26.0's form (record/eager/metrics-after.txt): `x_total` counter and `x_created` gauge families,
    # and every family it renders is on the real page with the same type.
    old = MetricsText(DIALECTS["0.26"], "qwen", {}).render(m, (2, 6, 4, [2, 1, 1]), tool_parser=False)
    real = (REPO / "tests" / "data" / "real-vllm-0.26" / "eager" / "metrics-after.txt").read_text(
        encoding="utf-8"
    )
    families = dict(re.findall(r"^# TYPE (vllm:\S+) (\S+)", old, re.MULTILINE))
    heads = dict(re.findall(r"^# TYPE (vllm:\S+) (\S+)", real, re.MULTILINE))
    assert (
        families["vllm:prompt_tokens_total"] == "counter"
        and families["vllm:prompt_tokens_created"] == "gauge"
    )
    spec = {name for name in families if "spec_decode" in name}  # the real run had no drafting
    assert {k: v for k, v in families.items() if k not in spec} == {
        k: v for k, v in heads.items() if k in families and k not in spec
    }
    assert "vllm:gpu_cache_usage_perc" not in families
