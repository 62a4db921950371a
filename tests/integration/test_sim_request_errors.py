"""Request-time errors as vLLM 0.26.0 logs them: a chat request for a model not served, and a tool
call the hermes parser cannot load (returned as text, with the parser's ERROR and traceback), each
against the real 0.26.0 log (tests/data/real-vllm-0.26/tiny.log holds two hermes failures). And a
client that leaves before its answer: vLLM aborts the request (vllm-facts.md §15)."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.integration.sim_support import metric
from tests.simserver import HANG_S, SimHandle, running_sim

pytestmark = pytest.mark.integration
REAL = Path(__file__).resolve().parents[2] / "tests" / "data" / "real-vllm-0.26" / "tiny.log"
RECORD = re.compile(r"^\(APIServer pid=\d+\) ERROR \d\d-\d\d \d\d:\d\d:\d\d \[(?P<src>[^\]]+)\] (?P<msg>.*)$")
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
FLAGS = ["--sim-vllm-version", "0.26", "--served-model-name", "tiny"]


def error_block(text: str, first: str) -> list[tuple[str, str]]:
    """The (source, message) records of the first ERROR block that starts with `first`, frames only."""
    lines = [re.sub(r"^(?:stdout|stderr)\t", "", line) for line in text.splitlines()]  # the tail's stream tag
    records = [(m["src"], m["msg"]) for line in lines if (m := RECORD.match(line))]
    start = next(i for i, (_, msg) in enumerate(records) if msg == first)
    block = [records[start]]
    for src, msg in records[start + 1 :]:
        if src != records[start][0] or msg == first:
            break
        block.append((src, msg))
    return [(src, msg) for src, msg in block if not msg.startswith("    ")]  # no source excerpts


def shape(block: list[tuple[str, str]]) -> list[str]:
    """Sources, frames (package path, line, function) and the exception type: not the host's paths."""
    out = []
    for src, msg in block:
        frame = re.match(r'  File ".*?(?P<path>(?:vllm|json)/[\w/]+\.py)", line (\d+), in (\w+)', msg)
        out.append(
            f"{src} {frame.group('path')}:{frame.group(2)} {frame.group(3)}"
            if frame
            else f"{src} {msg.split(':')[0]}"
        )
    return out


def test_a_tool_call_the_parser_cannot_load_is_logged_and_returned_as_text() -> None:
    flags = [
        *FLAGS,
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--sim-tool-fault",
        "malformed",
    ]
    with running_sim(flags) as sim:
        ask: dict[str, Any] = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [TOOL],
        }
        reply = requests.post(sim.url + "/v1/chat/completions", json=ask, timeout=30).json()
        assert sim.wait_for("JSONDecodeError", 10.0), sim.tail.text()[-3000:]
        text = sim.tail.text()
    message = reply["choices"][0]["message"]
    # 0.26.0's ChatMessage drops an empty tool_calls list (chat_completion/protocol.py:67-72)
    assert "tool_calls" not in message and message["content"].startswith(
        '<tool_call>\n{"name": "get_weather"'
    )
    assert message["content"].rstrip().endswith("</tool_call>")
    assert reply["choices"][0]["finish_reason"] == "stop"
    first = "Error in extracting tool call from response."
    ours, real = error_block(text, first), error_block(REAL.read_text(), first)
    assert shape(ours) == shape(real)  # hermes_tool_parser.py:117, 4 frames, json.decoder.JSONDecodeError


def test_a_chat_request_for_a_model_not_served_logs_an_error() -> None:
    with running_sim(FLAGS) as sim:
        ask: dict[str, Any] = {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}
        reply = requests.post(sim.url + "/v1/chat/completions", json=ask, timeout=30)
        assert sim.wait_for("Error with model", 10.0)
        text = sim.tail.text()
    assert reply.status_code == 404 and reply.json()["error"]["message"] == "The model `nope` does not exist."
    lines = [re.sub(r"^(?:stdout|stderr)\t", "", x) for x in text.splitlines()]
    line = next(m for x in lines if (m := RECORD.match(x)) and "Error with model" in x)
    assert line["src"] == "serving.py:228"  # 0.26.0 entrypoints/openai/chat_completion/serving.py:228
    assert line["msg"] == (
        "Error with model error=ErrorInfo(message='The model `nope` does not exist.', type='NotFoundError', "
        "param='model', code=404)"
    )


def _wait_for_metric(sim: SimHandle, name: str, labels: str, value: float) -> None:
    deadline = time.monotonic() + HANG_S  # only a hang reaches it
    while metric(sim, name, labels) != value:
        assert time.monotonic() < deadline, f"{name}{{{labels}}} never reached {value}"
        time.sleep(0.05)


def test_a_client_that_leaves_before_a_whole_answer_aborts_the_request() -> None:
    """`with_cancellation`: the handler is cancelled at the disconnect and the engine aborts the
    request; the answer's head never went out, so uvicorn logged no access line for it."""
    body = json.dumps({"messages": [{"role": "user", "content": "a long story"}], "max_tokens": 100,
                       "ignore_eos": True}).encode()  # fmt: skip
    head = "POST /v1/chat/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n"
    head += f"content-length: {len(body)}\r\n\r\n"
    with running_sim(["--sim-decode-ms", "1000"], speed=1) as sim:  # 100 s of tokens: it is left early
        with socket.create_connection(("127.0.0.1", sim.port)) as client:
            client.sendall(head.encode() + body)
            _wait_for_metric(sim, "vllm:num_requests_running", "", 1)
        _wait_for_metric(sim, "vllm:request_success_total", 'finished_reason="abort"', 1)
        _wait_for_metric(sim, "vllm:num_requests_running", "", 0)  # published by the next step
        assert '"POST /v1/chat/completions HTTP/1.1"' not in sim.tail.text()
