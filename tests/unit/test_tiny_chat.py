"""tiny-chat's training data and its device script (issue 22): the data must teach what the gates ask,
in the shapes vLLM produces, and hold out what it claims to hold out."""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gates.tool_cases import ASK_NOTHING, ASK_WEATHER, WEATHER_TOOL, schema_problem
from tests.conftest import REPO

SCRIPTS = REPO / "scripts" / "real-vllm"


def _script(name: str) -> ModuleType:
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))


@pytest.fixture(scope="module")
def data() -> ModuleType:
    return _script("tiny_chat_data")


@pytest.fixture(scope="module")
def verify() -> ModuleType:
    return _script("verify_tiny_chat")


def _prompts(examples: list[Any]) -> set[str]:
    return {e.messages[-1]["content"] for e in examples}


def test_the_same_seed_gives_the_same_chats(data: ModuleType) -> None:
    first = data.examples(REPO, "train", 22, 300)
    assert first == data.examples(REPO, "train", 22, 300)
    assert first != data.examples(REPO, "train", 23, 300)


def test_held_out_phrasings_and_cities_never_occur_in_training(data: ModuleType) -> None:
    train = data.examples(REPO, "train", 22, 4000)
    held = data.examples(REPO, "held_out", 22, 400)
    train_text = "\n".join(json.dumps(e.messages) + e.target for e in train)
    for city in data.CITIES_HELD:
        assert city not in train_text
    held_weather = {e.messages[-1]["content"] for e in held if e.kind == "tool_call"}
    assert held_weather and not held_weather & _prompts(train)


def test_the_gates_own_prompts_are_trained(data: ModuleType) -> None:
    """A gate whose prompt changes needs a retrained model: this fails first."""
    trained = _prompts(data.examples(REPO, "train", 22, 4000))
    assert ASK_WEATHER in trained and ASK_NOTHING in trained
    smoke_source = (REPO / "gates" / "smoke.py").read_text(encoding="utf-8")
    for ask in (
        "What is 17 + 25? Answer with the number only.",
        "请用中文回答：一年有几个季节？",
        "Write a Python function add(a, b) that returns the sum. Only the code.",
        "Name three primary colours.",
    ):
        assert ask in smoke_source and ask in trained


def test_the_tool_cases_live_once_in_the_gate(data: ModuleType, verify: ModuleType) -> None:
    """The scripts import the tool_call gate's tool and prompts: no copy to drift from it."""
    assert data.WEATHER_TOOL is WEATHER_TOOL
    assert (
        data.WEATHER_TRAIN[0].format(c=data.GATE_CITY) == ASK_WEATHER and data.HELLO_TRAIN[0] is ASK_NOTHING
    )
    asked = {name: example.messages[-1]["content"] for name, example, _ in verify.gate_cases()}
    assert asked["tool_call"] == asked["required"] == asked["named"] == ASK_WEATHER
    assert asked["no_tool"] == ASK_NOTHING
    for script in ("tiny_chat_data.py", "verify_tiny_chat.py"):
        source = (SCRIPTS / script).read_text(encoding="utf-8")
        copies = [
            text
            for text in (ASK_WEATHER, ASK_NOTHING, WEATHER_TOOL["function"]["description"])
            if text in source
        ]
        assert copies == [], f"{script} copies the gate's {copies}"


# sha256 of every chat the tiny-chat model is trained and held-out-verified on (seed 22, the device
# run's counts), rendered through its template as transformers renders it: the data must not move
# when where it comes from does. A deliberate change of the data updates it (and retrains the model).
RENDERED_DIGEST = "390e5ef983bbb9ddbc18b46079118388dd8e928f0cdbc9dfb4f086ef6d7f746f"


def test_the_rendered_training_chats_are_the_ones_the_model_was_trained_on(data: ModuleType) -> None:
    template = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(
        data.CHAT_TEMPLATE
    )
    digest = hashlib.sha256()
    for split, count in (("train", 4000), ("held_out", 400)):
        for e in data.examples(REPO, split, 22, count):
            text = template.render(messages=e.messages, tools=e.tools, add_generation_prompt=True, **e.kwargs)
            row = [e.kind, text, e.target, e.tools, e.kwargs, e.ends, e.check]
            digest.update(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    assert digest.hexdigest() == RENDERED_DIGEST


def test_structured_output_targets_have_vllms_shapes_and_match_the_schema(data: ModuleType) -> None:
    train = data.examples(REPO, "train", 22, 2000)
    params = WEATHER_TOOL["function"]["parameters"]
    required = [json.loads(e.target) for e in train if e.kind == "required"]
    named = [json.loads(e.target) for e in train if e.kind == "named"]
    assert required and named
    for value in required:  # vLLM 0.26: an array of {"name", "parameters"} for tool_choice=required
        assert value[0]["name"] == "get_weather" and schema_problem(value[0]["parameters"], params) is None
    for value in named:  # a named tool: the tool's own parameters object
        assert schema_problem(value, params) is None
    calls = [e.target for e in train if e.kind == "tool_call"]
    assert all(t.startswith("<tool_call>{") and t.endswith("}</tool_call>") for t in calls)


def test_evidence_reads_a_status_file_and_a_bad_one_without_a_traceback(tmp_path: Path) -> None:
    status = tmp_path / "status.json"
    status.write_text(
        json.dumps(
            {
                "gates": [
                    {
                        "name": "tool_call",
                        "verdict": "pass",
                        "duration_s": 1.5,
                        "summary": "ALL_PASS (auto) on model tiny-chat",
                    }
                ]
            }
        )
    )
    run = [sys.executable, str(SCRIPTS / "i22_evidence.py"), "gates"]
    good = subprocess.run([*run, str(status)], capture_output=True, text=True, timeout=60)
    assert good.returncode == 0 and "tool_call: pass (1.5 s): ALL_PASS" in good.stdout
    status.write_text("{not json")
    bad = subprocess.run([*run, str(status)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "no status" in bad.stdout and "Traceback" not in bad.stderr


def test_the_device_script_refuses_an_unknown_step_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(SCRIPTS / "check-i22.sh"), "1", "9"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"OUT": str(out), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2 and "unknown step 9" in done.stderr
    assert not out.exists()


def test_output_is_read_as_the_hermes_parser_reads_it(verify: ModuleType) -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert verify.hermes_read("Sure. " + call) == (
        "Sure. ",
        [{"name": "get_weather", "arguments": {"city": "Paris"}}],
    )
    assert verify.hermes_read("Hello!") == ("Hello!", [])
    # an unclosed call is still read to the end; JSON that does not parse fails the whole extraction
    assert verify.hermes_read('<tool_call>{"name": "x", "arguments": {}}')[1] == [
        {"name": "x", "arguments": {}}
    ]
    assert verify.hermes_read('<tool_call>{"name": "get_weather", "arguments": {"city"')[1] is None


def test_the_judges_fail_what_the_gates_would_fail(verify: ModuleType) -> None:
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert verify.judge("tool_call", call, True, "Paris")[0]
    assert not verify.judge("tool_call", call.replace("Paris", "Oslo"), True, "Paris")[0]
    assert not verify.judge("tool_call", "It is sunny.", True, "Paris")[0]
    assert verify.judge(
        "required", '[{"name": "get_weather", "parameters": {"city": "Paris"}}]', True, "Paris"
    )[0]
    assert not verify.judge("named", '{"city": "Paris"', False, "Paris")[0]
    assert not verify.judge("hello", call, True, "")[0]  # a call where none is needed
    assert (
        verify.judge("arithmetic", "42", True, "42")[0]
        and not verify.judge("arithmetic", "41", True, "42")[0]
    )
    assert verify.judge("think", "Let me think.\n</think>\n\n42", True, "")[0]
    assert not verify.judge("think", "42", True, "")[0]
    loop = "the same words again and again, " * 8
    assert verify.judge("degenerate", loop, False, "")[0]
    assert not verify.judge("degenerate", loop, True, "")[0]  # it must not close its turn
