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
    arguments_for,
    as_text,
    check_server_support,
    plan_calls,
    validate_tool_usage,
    value_for,
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


# ---- tool calls: the request checks and the simulated model's choice -----------------------------


@pytest.mark.parametrize(
    ("choice", "message", "param"),
    [
        ("sometimes", "Invalid value for `tool_choice`: sometimes!", "tool_choice"),
        ({"type": "function"}, "Invalid value for `function`: `None`", "tool_choice.function"),
        ({"function": "get_weather"}, "Invalid value for `function`", "tool_choice.function"),
        ({"function": {}}, "Expected field `name` in `function`", "tool_choice.function.name"),
    ],
)
def test_each_bad_tool_choice_names_the_field_it_is_about(choice: object, message: str, param: str) -> None:
    with pytest.raises(RequestInvalid) as caught:
        validate_tool_usage({"tools": [WEATHER], "tool_choice": choice})
    assert caught.value.message.startswith(message) and caught.value.param == param
    with pytest.raises(RequestInvalid, match="`tools` must be set") as caught:
        validate_tool_usage({"tool_choice": "required"})
    assert caught.value.param == "tool_choice"


def test_no_tool_choice_or_none_needs_no_tools_and_an_explicit_choice_is_kept() -> None:
    for plain in ({}, {"tool_choice": "none"}, {"tool_choice": None}):
        validate_tool_usage(dict(plain))  # accepted: no RequestInvalid
    body: dict[str, Any] = {"tools": [WEATHER], "tool_choice": "required"}
    validate_tool_usage(body)
    assert body["tool_choice"] == "required"
    named = {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    validate_tool_usage(named)  # a tool the request has: accepted


def test_a_parser_ready_server_or_no_choice_needs_nothing_and_auto_needs_both_flags() -> None:
    assert check_server_support("required", True, False) is None, "the parser alone serves required"
    assert check_server_support(None, False, False) is None
    assert check_server_support("auto", False, True) is not None, "auto needs the parser too"


def test_the_model_answers_in_text_when_no_call_is_possible_or_wanted() -> None:
    rng = random.Random(0)
    assert plan_calls([], "auto", "weather in Paris", "user", rng) == []
    assert plan_calls([WEATHER], "none", "weather in Paris", "user", rng) == []
    assert plan_calls([WEATHER], None, "weather in Paris", "user", rng) == []
    assert plan_calls([WEATHER], "auto", "你好", "user", rng) == [], "a greeting, in Chinese too"
    assert plan_calls([WEATHER], "auto", "Hello there", "user", rng) == []


def test_a_named_choice_calls_that_tool_whatever_the_question() -> None:
    named = {"type": "function", "function": {"name": "web_search"}}
    (call,) = plan_calls([WEATHER, SEARCH], named, "weather in Paris", "user", random.Random(0))
    assert call.name == "web_search" and json.loads(call.arguments) == {"query": "weather in Paris"}


def test_the_tool_sharing_the_most_words_is_called_and_a_tie_keeps_the_first() -> None:
    rng = random.Random(0)
    (search,) = plan_calls([WEATHER, SEARCH], "required", "search the web for llamas", "user", rng)
    assert search.name == "web_search"
    (first,) = plan_calls([SEARCH, WEATHER], "required", "zzz qqq", "user", rng)
    assert first.name == "web_search", "no word in common: the first tool"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, 25),
        ({"type": "number"}, 25.5),
        ({"type": ["null", "integer"]}, 25),
        ({"type": "boolean"}, True),
        ({"enum": ["metric", "imperial"]}, "metric"),
        ({"type": "array", "items": {"type": "integer"}}, [25]),
        ({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}, {"n": 25.5}),
        ({}, "Oslo"),  # no type: a string; a place in the question is the likeliest value
    ],
)
def test_an_argument_takes_its_schemas_type_from_what_the_question_says(
    schema: dict[str, Any], value: object
) -> None:
    assert value_for("value", schema, "What about 25.5 degrees in Oslo?", random.Random(0)) == value


def test_arguments_without_a_number_or_place_take_defaults_of_the_right_type() -> None:
    rng = random.Random(0)
    assert value_for("n", {"type": "integer"}, "how many?", rng) == 1
    assert value_for("x", {"type": "number"}, "how much?", rng) == 1.0
    assert value_for("city", {"type": "string"}, "what is the weather", rng) == "Paris"
    assert value_for("date", {"type": "string"}, "when", rng) == "2026-01-01"
    assert value_for("unit", {"type": "string"}, "which", rng) == "celsius"
    assert value_for("query", {"type": "string"}, "  find   cheap\n flights ", rng) == "find cheap flights"
    assert value_for("label", {"type": "string"}, "nothing here", rng) == "example"


def test_only_the_required_arguments_are_filled_or_every_one_when_none_is_required() -> None:
    rng = random.Random(0)
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}, "required": ["b"]}
    assert arguments_for(schema, "x", rng) == {"b": True}
    assert arguments_for({"properties": schema["properties"]}, "x", rng) == {"a": 1, "b": True}
    assert arguments_for({}, "x", rng) == {}


def test_the_text_fault_writes_the_calls_as_json_in_the_answer_and_leaves_the_calls_as_they_were() -> None:
    calls = plan_calls([WEATHER], "required", "weather in Oslo for 2 days", "user", random.Random(0))
    assert apply_fault(calls, "text") == calls and apply_fault(calls, None) == calls
    assert json.loads(as_text(calls)) == {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}
    assert apply_fault([], "malformed") == []
    assert apply_fault(calls, "wrong-name")[0].name == "get_weather_unknown"
