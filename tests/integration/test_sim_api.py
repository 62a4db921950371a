"""vllm-sim's HTTP API against vllm-facts.md §7-8: shapes, tool gating, reasoning, auth, metrics, truth."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests

from tests.simserver import SimHandle, running_sim

# one simulator for the module: its tests go to one worker (pyproject addopts: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_sim_api")]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
    },
}
CLOCK = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time",
        "parameters": {"type": "object", "properties": {}},
    },
}
SPEC = json.dumps({"method": "mtp", "num_speculative_tokens": 2})


@pytest.fixture(scope="module")
def truth_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("truth") / "truth.jsonl"


@pytest.fixture(scope="module")
def sim(truth_path: Path) -> Iterator[SimHandle]:
    args = [
        "--served-model-name",
        "qwen3-8b",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--enable-prompt-tokens-details",
        "--speculative-config",
        SPEC,
        "--max-num-seqs",
        "4",
        "--sim-ground-truth",
        str(truth_path),
    ]
    with running_sim(args, {"VLLM_LOG_STATS_INTERVAL": "0.3"}, speed=10) as handle:
        yield handle


@pytest.fixture(scope="module")
def guarded() -> Iterator[SimHandle]:
    with running_sim(
        ["--api-key", "sk-test", "--reasoning-parser", "qwen3", "--disable-log-stats"]
    ) as handle:
        yield handle


def chat(sim: SimHandle, body: dict[str, Any], key: str | None = None, **headers: str) -> requests.Response:
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return requests.post(sim.url + "/v1/chat/completions", json=body, headers=headers, timeout=30)


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "temperature": 0, **extra}


def sse(response: requests.Response) -> list[Any]:
    out: list[Any] = []
    for line in response.text.split("\n\n"):
        if line.startswith("data: "):
            out.append("[DONE]" if line == "data: [DONE]" else json.loads(line[6:]))
    return out


def test_health_version_and_models(sim: SimHandle) -> None:
    health = requests.get(sim.url + "/health", timeout=5)
    assert health.status_code == 200 and health.content == b""
    assert requests.post(sim.url + "/ping", timeout=5).status_code == 200
    assert requests.get(sim.url + "/version", timeout=5).json() == {"version": "0.33.0"}
    models = requests.get(sim.url + "/v1/models", timeout=5).json()
    assert models["object"] == "list" and len(models["data"]) == 1
    card = models["data"][0]
    assert {k: card[k] for k in ("id", "object", "owned_by", "root", "parent", "max_model_len")} == {
        "id": "qwen3-8b",
        "object": "model",
        "owned_by": "vllm",
        "root": "Qwen/Qwen3-8B",
        "parent": None,
        "max_model_len": 40960,
    }
    assert card["permission"][0]["object"] == "model_permission" and isinstance(card["created"], int)


def test_unknown_model_is_404(sim: SimHandle) -> None:
    r = chat(sim, {**user("hi"), "model": "nope"})
    assert r.status_code == 404
    assert r.json() == {
        "error": {
            "message": "The model `nope` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }


def test_chat_answer_shape_and_exact_repeat(sim: SimHandle) -> None:
    r = chat(sim, {**user("What is 17 + 25?"), "model": "qwen3-8b"}, **{"X-Request-Id": "abc123"})
    body = r.json()
    assert (
        body["id"] == "chatcmpl-abc123"
        and body["object"] == "chat.completion"
        and body["model"] == "qwen3-8b"
    )
    choice = body["choices"][0]
    assert "42" in choice["message"]["content"] and choice["finish_reason"] == "stop"
    assert choice["message"]["reasoning"] is None and "tool_calls" not in choice["message"]
    assert "reasoning_content" not in choice["message"]
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "cached_tokens" in usage["prompt_tokens_details"]
    again = chat(sim, user("What is 17 + 25?")).json()
    assert again["choices"][0]["message"]["content"] == choice["message"]["content"]


def test_stream_chunks_usage_and_done(sim: SimHandle) -> None:
    body = user("Tell me about old maps", stream=True, stream_options={"include_usage": True}, max_tokens=40)
    events = sse(chat(sim, body))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 40
    last = chunks[-2]["choices"][0]
    assert last["finish_reason"] == "length" and "stop_reason" in last
    assert all("usage" not in c for c in chunks[:-1])
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    whole = chat(sim, user("Tell me about old maps", max_tokens=40)).json()
    assert text == whole["choices"][0]["message"]["content"]


def test_completions(sim: SimHandle) -> None:
    r = requests.post(
        sim.url + "/v1/completions",
        json={"prompt": "What is 6 * 7?", "max_tokens": 20, "temperature": 0},
        timeout=10,
    ).json()
    assert (
        r["object"] == "text_completion" and "42" in r["choices"][0]["text"] and r["id"].startswith("cmpl-")
    )
    s = requests.post(
        sim.url + "/v1/completions", json={"prompt": "The river", "max_tokens": 5, "stream": True}, timeout=10
    )
    chunks = sse(s)
    assert chunks[-1] == "[DONE]" and chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "text_completion" for c in chunks[:-1])


def test_tool_calls(sim: SimHandle) -> None:
    auto = chat(sim, user("What is the weather in Paris?", tools=[CLOCK, WEATHER])).json()["choices"][0]
    assert auto["finish_reason"] == "tool_calls"
    call = auto["message"]["tool_calls"][0]
    assert call["id"].startswith("chatcmpl-tool-") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {
        "city": "Paris"
    }
    hello = chat(sim, user("say hello", tools=[WEATHER])).json()["choices"][0]
    assert hello["finish_reason"] == "stop" and hello["message"]["content"] == "Hello!"
    named = chat(
        sim,
        user(
            "hi", tools=[CLOCK, WEATHER], tool_choice={"type": "function", "function": {"name": "get_time"}}
        ),
    ).json()["choices"][0]
    assert (
        named["finish_reason"] == "stop"
        and named["message"]["tool_calls"][0]["function"]["name"] == "get_time"
    )
    required = chat(sim, user("hi", tools=[WEATHER], tool_choice="required")).json()["choices"][0]
    assert required["finish_reason"] == "tool_calls"
    none = chat(sim, user("weather in Rome?", tools=[WEATHER], tool_choice="none")).json()["choices"][0]
    assert "tool_calls" not in none["message"]
    streamed = sse(chat(sim, user("What is the weather in Oslo?", tools=[WEATHER], stream=True)))
    deltas = [d for c in streamed[:-1] for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert deltas[0]["function"]["name"] == "get_weather" and deltas[0]["id"].startswith("chatcmpl-tool-")
    assert json.loads("".join(d["function"].get("arguments", "") for d in deltas)) == {"city": "Oslo"}
    assert streamed[-2]["choices"][0]["finish_reason"] == "tool_calls"


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def test_metrics_move_with_requests(sim: SimHandle) -> None:
    before = requests.get(sim.url + "/metrics", timeout=5).text
    long_doc = "Remember this sentence about the harbour and the boats. " * 30
    for _ in range(2):
        chat(sim, user(long_doc + " What is 1 + 1?"))
    after = requests.get(sim.url + "/metrics", timeout=5).text
    assert 'model_name="qwen3-8b"' in after and 'engine="0"' in after
    for name in (
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:tool_call_parser_invocations_total",
    ):
        if name != "vllm:tool_call_parser_invocations_total":
            assert metric(after, name) > metric(before, name), name
    success = 'vllm:request_success_total{engine="0",model_name="qwen3-8b",finished_reason="stop"}'
    assert metric(after, success[:-1].split("{")[0]) >= 2
    assert (
        metric(after, "vllm:prefix_cache_hits_total") - metric(before, "vllm:prefix_cache_hits_total") >= 300
    )
    for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert f"# TYPE {gauge} gauge" in after
    accepted = metric(after, "vllm:spec_decode_num_accepted_tokens_total")
    assert 0 < accepted <= metric(after, "vllm:spec_decode_num_draft_tokens_total")


async def _stream_times(url: str, body: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    seen: list[tuple[float, dict[str, Any]]] = []
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        while True:
            line = await resp.content.readline()
            if not line:
                break
            now = time.monotonic()  # the sim's truth stamps this clock too (one host)
            text = line.decode().strip()
            if text.startswith("data: {"):
                seen.append((now, json.loads(text[6:])))
    return seen


def test_ground_truth_matches_a_streaming_client(sim: SimHandle, truth_path: Path) -> None:
    """Every chunk the client read is a token the sim recorded writing, stamped before the client
    read it; how long after (a median under 5 ms here) is bench/bench_accuracy.py's figure."""
    body = user(
        "Tell me about honey bees",
        stream=True,
        stream_options={"include_usage": True},
        max_tokens=60,
        ignore_eos=True,
    )
    seen = asyncio.run(_stream_times(sim.url + "/v1/chat/completions", body))
    rid = seen[0][1]["id"]
    rows = [json.loads(line) for line in truth_path.read_text().splitlines()]
    row = next(r for r in rows if r["id"] == rid)
    assert row["output_tokens"] == seen[-1][1]["usage"]["completion_tokens"] == 60 == len(row["tokens"])
    assert row["prompt_tokens"] == seen[-1][1]["usage"]["prompt_tokens"] and row["stream"] is True
    content = [t for t, c in seen[1:] if c["choices"]]
    truth_times = sorted({tuple(t) for t in row["tokens"]})
    assert len(content) == len(truth_times)
    # the sim stamps a chunk just before it writes it (vllm_sim/delivery.py): the client reads it after
    assert all(client >= mono for client, (mono, _) in zip(content, truth_times, strict=True))
    assert row["first_token_wall"] == row["tokens"][0][1] and row["arrival_mono"] <= row["first_token_mono"]


def test_requests_beyond_max_num_seqs_wait(sim: SimHandle, truth_path: Path) -> None:
    async def burst() -> list[str]:
        async with aiohttp.ClientSession() as session:

            async def one(i: int) -> str:
                body = user(f"Story number {i} about trains", max_tokens=30, ignore_eos=True)
                async with session.post(sim.url + "/v1/chat/completions", json=body) as resp:
                    return str((await resp.json())["id"])

            return list(await asyncio.gather(*(one(i) for i in range(6))))

    ids = set(asyncio.run(burst()))
    rows = sorted(
        (json.loads(x) for x in truth_path.read_text().splitlines() if json.loads(x)["id"] in ids),
        key=lambda r: r["first_token_mono"],
    )
    assert len(rows) == 6
    first_done = min(r["finish_mono"] for r in rows[:4])
    assert all(r["first_token_mono"] >= first_done for r in rows[4:])  # only 4 slots


def test_periodic_stats_lines(sim: SimHandle) -> None:
    chat(sim, user("Tell me about lighthouses", max_tokens=30, ignore_eos=True))
    stats = sim.wait_for("Engine 000: Avg prompt throughput:", 3.0)
    assert stats and "GPU KV cache usage:" in stats and "Prefix cache hit rate:" in stats
    spec = sim.wait_for("SpecDecoding metrics: Mean acceptance length:", 3.0)
    assert spec and "Avg Draft acceptance rate:" in spec


def test_api_key_and_open_paths(guarded: SimHandle) -> None:
    r = requests.get(guarded.url + "/v1/models", timeout=5)
    assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}
    ok = requests.get(guarded.url + "/v1/models", headers={"Authorization": "Bearer sk-test"}, timeout=5)
    assert ok.status_code == 200
    assert requests.get(guarded.url + "/health", timeout=5).status_code == 200
    metrics = requests.get(guarded.url + "/metrics", timeout=5)
    assert metrics.status_code == 200 and "vllm:" not in metrics.text  # --disable-log-stats


def test_tool_choice_needs_both_flags(guarded: SimHandle) -> None:
    cases = [
        ("auto", '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
        ("required", 'tool_choice="required" requires --tool-call-parser to be set'),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            'tool_choice=function "get_weather" requires --tool-call-parser to be set',
        ),
    ]
    for choice, message in cases:
        r = chat(guarded, user("weather?", tools=[WEATHER], tool_choice=choice), key="sk-test")
        assert r.status_code == 400 and r.json()["error"] == {
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    plain = chat(guarded, user("weather?", tools=[WEATHER], tool_choice="none"), key="sk-test")
    assert plain.status_code == 200
    empty = chat(guarded, user("x", tools=[]), key="sk-test")
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "tools"


def test_reasoning_field(guarded: SimHandle) -> None:
    r = chat(guarded, user("What is 8 + 5?"), key="sk-test").json()["choices"][0]["message"]
    assert r["reasoning"] and "13" in r["content"] and "reasoning_content" not in r
    starved = chat(guarded, user("What is 8 + 5?", max_tokens=5), key="sk-test").json()["choices"][0]
    assert starved["finish_reason"] == "length" and starved["message"]["content"] is None
    off = chat(
        guarded, user("What is 8 + 5?", chat_template_kwargs={"enable_thinking": False}), key="sk-test"
    )
    assert off.json()["choices"][0]["message"]["reasoning"] is None
    events = sse(chat(guarded, user("What is 8 + 5?", stream=True), key="sk-test"))
    kinds = [k for e in events[1:-1] for k in e["choices"][0]["delta"] if k in ("reasoning", "content")]
    assert kinds[0] == "reasoning" and "content" in kinds
    assert kinds.index("content") > max(i for i, k in enumerate(kinds) if k == "reasoning")
