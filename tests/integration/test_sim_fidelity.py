"""The simulator's 0.26 dialect against the real vLLM 0.26.0 (tests/data/real-vllm-0.26/, an H200 run).

For each recorded run the simulator is started with the same flags (the profile the launcher
rendered), stopped with SIGTERM like the launcher stops vLLM, and its log is compared with the real
one by `scripts/real-vllm/fidelity.py`: the parser's event sequence and facts, and every named line's
presence, order and shape. HTTP: the reply shapes the real run recorded (a streamed chat completion,
the start of the tool-call replies; bodies truncated by the gate report) against the simulator's.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

from launcher.logfacts.logfile import parse_file
from tests.simserver import running_sim

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "real-vllm-0.26"
STREAM = REPO / "tests" / "data" / "bench" / "vllm-0.26.0-tiny-stream.sse"
FACTS_EQUAL = (
    "vllm_version",
    "capture_sizes",
    "graphs_captured_by_mode",
    "cudagraph_mode",
    "model_runner",
    "outcome",
)


def load_fidelity() -> ModuleType:
    path = REPO / "scripts" / "real-vllm" / "fidelity.py"
    spec = importlib.util.spec_from_file_location("real_vllm_fidelity", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fidelity = load_fidelity()


def event_kinds(path: Path) -> list[str]:
    kinds: list[str] = []
    for event in parse_file(path)[1]:
        if not kinds or kinds[-1] != event.kind:
            kinds.append(str(event.kind))
    return kinds


def _run_like(
    log: str, profile: tuple[str, list[str]], tmp_path: Path, http: list[Any] | None = None
) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    """The simulator run as the recorded run ran; both logs with their facts, events already equal."""
    real = DATA / log
    args, env = fidelity.profile_args(*profile)
    sim = fidelity.run_sim(real, args, env, tmp_path / "sim.log", http=http)
    assert event_kinds(sim) == event_kinds(real)
    return real, sim, parse_file(real)[0].to_json(), parse_file(sim)[0].to_json()


@pytest.mark.parametrize(("log", "profile"), sorted(fidelity.RECORDED.items()))
def test_the_026_dialect_logs_what_the_real_026_logged(
    log: str, profile: tuple[str, list[str]], tmp_path: Path
) -> None:
    http: list[Any] = []
    real, sim, real_facts, sim_facts = _run_like(log, profile, tmp_path, http)
    assert {k: sim_facts[k] for k in FACTS_EQUAL} == {k: real_facts[k] for k in FACTS_EQUAL}
    if (real.parent / "http.txt").exists():  # the recorded replies and /metrics page (record/eager)
        scores = fidelity.score(http)
        assert scores["HTTP shapes"][0] == scores["HTTP shapes"][1] > 200, fidelity.table(http, False)
        assert scores["metric families"] == (88, 88), fidelity.table(http, False)
    for key in ("kv_cache_tokens", "max_concurrency"):  # the numbers depend on the simulated model
        assert real_facts[key] is not None and sim_facts[key] is not None
    rows = fidelity.compare(real, sim)
    assert len(rows) > 50 and not [r for r in rows if r.verdict == "DIFF"], fidelity.table(rows, False)


@pytest.mark.parametrize(("log", "profile"), sorted(fidelity.FAILED.items()))
def test_the_026_dialect_fails_as_the_real_026_failed(
    log: str, profile: tuple[str, list[str]], tmp_path: Path
) -> None:
    """Each failed start the H200 recorded (free memory with torch holding 120 GiB, a KV cache too
    small, an unknown reasoning parser, a port in use): the same failure, lines and tracebacks."""
    real, sim, real_facts, sim_facts = _run_like(log, profile, tmp_path)
    assert sim_facts["failure_kind"] == real_facts["failure_kind"] and real_facts["outcome"] == "failed"
    header = re.compile(r"^\(\S+ pid=\d+\) (?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]+\] )?")
    message = [header.sub("", str(f["failure_line"])) for f in (real_facts, sim_facts)]
    assert message[0] == message[1]  # vLLM's own message, to the letter
    last = [[x for x in p.read_text().splitlines() if x.startswith("(")][-1] for p in (real, sim)]
    assert last[0].split(") ", 1)[1] == last[1].split(") ", 1)[1]  # the API server's last word
    rows = fidelity.compare(real, sim)
    assert len(rows) > 20 and not [r for r in rows if r.verdict == "DIFF"], fidelity.table(rows, False)


def test_the_comparison_fails_on_a_different_run() -> None:
    """It can fail: the plain run against the ngram run (V2 vs V1 runner, 102 vs 4 graphs)."""
    rows = {(r.section, r.check): r for r in fidelity.compare(DATA / "tiny.log", DATA / "tiny-ngram.log")}
    assert (rows[("facts", "model_runner")].real, rows[("facts", "model_runner")].sim) == ("v2", "v1")
    assert rows[("facts", "graphs_captured_by_mode")].verdict == "DIFF"
    assert (rows[("lines", "V2 runner")].sim, rows[("lines", "graph memory profile")].real) == (
        "absent",
        "absent",
    )
    assert (
        rows[("lines", "graphs captured")].verdict == "DIFF"
    )  # model_runner.py:747 vs gpu_model_runner.py:6844
    assert rows[("events", "equal at 0")].verdict == "same"  # the same phases, in the same order


def skeleton(value: Any) -> Any:
    """Field names in order and value types: what a client depends on, not what the model said."""
    if isinstance(value, dict):
        return [(key, skeleton(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [skeleton(value[0])] if value else []
    return type(value).__name__


def chunks(sse: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: {")]


def test_026_reply_shapes_match_the_real_026_replies() -> None:
    real = chunks(STREAM.read_text(encoding="utf-8"))
    report = json.loads((DATA / "try-tiny.json").read_text(encoding="utf-8"))
    tool_bodies = [
        c["body"] for g in report["gates"] for c in g.get("evidence", {}).get("cases", {}).values()
    ]
    flags = ["--sim-vllm-version", "0.26", "--served-model-name", "tiny"]
    with running_sim([*flags, "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]) as sim:
        ask: dict[str, Any] = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "tell me a story"}],
            "max_tokens": 24,
        }
        streamed = requests.post(
            sim.url + "/v1/chat/completions",
            json={**ask, "stream": True, "stream_options": {"include_usage": True}},
            timeout=30,
        ).text
        tool: dict[str, Any] = {
            "type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}
        }
        called = requests.post(
            sim.url + "/v1/chat/completions",
            json={**ask, "tools": [tool], "tool_choice": "required"},
            timeout=30,
        ).text
    ours = chunks(streamed)
    # first chunk (role), a content chunk, the finishing chunk, the usage chunk
    for index in (0, 1, -2, -1):
        assert skeleton(ours[index]) == skeleton(real[index]), index
    assert re.fullmatch(r"chatcmpl-[0-9a-f]{16}", ours[0]["id"]) and re.fullmatch(
        r"chatcmpl-[0-9a-f]{16}", real[0]["id"]
    )
    assert re.fullmatch(r"vllm-0\.26\.0-[0-9a-f]{8}", ours[-1]["system_fingerprint"])
    # The tool-call replies are cut at 2000 characters: compare the field names before `content`.
    for body in tool_bodies:
        head = body.split('"content"', 1)[0]
        assert re.findall(r'"(\w+)":', head) == re.findall(r'"(\w+)":', called.split('"content"', 1)[0])
        assert re.match(r'\{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion","created":\d+,', body)
        assert re.match(r'\{"id":"chatcmpl-[0-9a-f]{16}","object":"chat.completion","created":\d+,', called)
