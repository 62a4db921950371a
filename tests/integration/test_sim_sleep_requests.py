"""What a sleep does to requests, as vLLM 0.26.0 does it (vllm-facts.md §12): the pause modes
`abort`, `wait` and `keep`, requests sent while asleep, and the prefix-cache reset that preempts.
Real processes, HTTP on loopback; every check is a count, a finish reason or an order of events."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest
import requests

from tests.integration.sim_support import Stream, answer, chat, log_line, metric
from tests.simserver import HANG_S, SimHandle, running_sim

pytestmark = pytest.mark.integration

DEV = {"VLLM_SERVER_DEV_MODE": "1"}
V026 = ["--sim-vllm-version", "0.26", "--enable-sleep-mode"]
SLOW = [*V026, "--sim-decode-ms", "50"]  # 5 ms steps at speed 10: a 300-token stream lasts ~1.5 s
LONG = 300
QUESTION = "What is 17 + 25?"
# long enough for full prefix-cache blocks (16 tokens each)
CACHED = "Please read this long prompt about rivers, mountains, lakes and forests carefully, then say hello."


def post(sim: SimHandle, path: str, timeout_s: float = 60.0, **kw: object) -> requests.Response:
    return requests.post(sim.url + path, timeout=timeout_s, **kw)  # type: ignore[arg-type]


def sleeping(sim: SimHandle) -> bool:
    return bool(requests.get(sim.url + "/is_sleeping", timeout=30).json()["is_sleeping"])


def story(text: str = "story", tokens: int = LONG) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": tokens, "ignore_eos": True,
            "temperature": 0}  # fmt: skip


def streams(sim: SimHandle, count: int, tokens: int = LONG) -> list[Stream]:
    return [Stream(sim, story(f"story number {i}", tokens)).start() for i in range(count)]


def content_tokens(stream: Stream) -> int:
    return sum(1 for c in stream.chunks() if c["choices"] and c["choices"][0]["delta"].get("content"))


def last_choice(stream: Stream) -> dict[str, Any]:
    return dict([c for c in stream.chunks() if c["choices"]][-1]["choices"][0])


def log_order(sim: SimHandle, *patterns: str) -> list[int]:
    """The index in the log of the first line holding each text, each waited for."""
    for text in patterns:
        log_line(sim, text.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)"))
    lines = list(sim.tail.lines)
    return [next(i for i, line in enumerate(lines) if text in line) for text in patterns]


WAITING = "Waiting for in-flight requests to complete before sleeping..."
RESET = "Successfully reset prefix cache"
ASLEEP = "seconds to fall asleep."


def wait_metric(sim: SimHandle, name: str, value: float, timeout_s: float = HANG_S) -> None:
    """Until the metric reads `value`; the deadline only ends a hang (decision 0013)."""
    deadline = time.monotonic() + timeout_s
    while metric(sim, name) != value:
        assert time.monotonic() < deadline, f"{name} never became {value}"
        time.sleep(0.01)


def test_abort_ends_every_request_with_finish_reason_abort_then_done() -> None:
    """0.26.0 `pause_scheduler` (v1/engine/core.py:1788-1792) finishes every request as aborted; the
    stream's last chunk carries what came, `finish_reason: "abort"`, then `data: [DONE]` (measured:
    four streams of 1,500 ended at ~413 tokens). A request still queued gets no finish chunk."""
    with running_sim([*SLOW, "--max-num-seqs", "5"], DEV, speed=10) as sim:
        whole: dict[str, requests.Response] = {}
        waiter = threading.Thread(
            target=lambda: whole.update(r=post(sim, "/v1/chat/completions", json=story()))
        )
        waiter.start()
        wait_metric(sim, "vllm:num_requests_running", 1)
        running = streams(sim, 4)
        for stream in running:
            stream.wait_events(5)
        queued = Stream(sim, story("the sixth one")).start()  # no seat: max-num-seqs 5
        queued.wait_head()
        assert post(sim, "/sleep?level=1&mode=abort").status_code == 200
        for stream in running:
            events = stream.finish()
            assert events[-1] == "[DONE]" and 0 < content_tokens(stream) < LONG
            assert last_choice(stream) == {
                "index": 0,
                "delta": {"content": ""},
                "logprobs": None,
                "finish_reason": "abort",
                "stop_reason": None,
                "token_ids": None,
            }
        events = queued.finish()  # the abort is its first output: the role chunk, no finish chunk
        assert len(events) == 2 and events[-1] == "[DONE]"
        assert json.loads(events[0])["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        waiter.join(60)
        reply = whole["r"].json()
        assert whole["r"].status_code == 200 and reply["choices"][0]["finish_reason"] == "abort"
        assert 0 < reply["usage"]["completion_tokens"] < LONG
        assert metric(sim, "vllm:request_success_total", 'finished_reason="abort"') == 6
        assert sleeping(sim)
        waiting, reset, asleep = log_order(sim, WAITING, RESET, ASLEEP)
        assert waiting < reset < asleep


def test_wait_holds_the_sleep_until_the_running_requests_are_done() -> None:
    """`mode=wait` pauses new requests only and sleeps once the running ones have finished
    (measured: the /sleep call took 4.47 s, the four streams ended first, then it slept)."""
    with running_sim(SLOW, DEV, speed=10) as sim:
        running = streams(sim, 4)
        for stream in running:
            stream.wait_events(5)
        answered: dict[str, Any] = {}

        def sleep_wait() -> None:
            answered["sleep"] = post(sim, "/sleep?level=1&mode=wait")
            answered["finished"] = metric(sim, "vllm:request_success_total", 'finished_reason="length"')

        sleeper = threading.Thread(target=sleep_wait)
        sleeper.start()
        log_line(sim, WAITING.replace(".", r"\."))
        assert sleeping(sim)  # the scheduler is paused from the start: is_sleeping is true already
        late = Stream(sim, story("too late")).start()  # new requests queue until the wake
        late.wait_head()
        sleeper.join(60)
        assert answered["sleep"].status_code == 200
        assert answered["finished"] == 4  # all four had finished when /sleep answered
        for stream in running:
            stream.finish()
            assert content_tokens(stream) == LONG and last_choice(stream)["finish_reason"] == "length"
        assert late.events == []
        waiting, reset, asleep = log_order(sim, WAITING, RESET, ASLEEP)
        assert waiting < reset < asleep
        assert post(sim, "/wake_up").status_code == 200
        late.finish()
        assert content_tokens(late) == LONG and last_choice(late)["finish_reason"] == "length"


def test_keep_freezes_the_requests_and_after_the_wake_they_finish_whole() -> None:
    """`mode=keep` freezes what runs; from level 1 on the pause's cache reset preempts it
    (`_reset_caches` with `reset_running_requests=True`, core.py:806-819), so after the wake each
    request recomputes and goes on to all its tokens (measured: all four to 1,500)."""
    with running_sim(SLOW, DEV, speed=10) as sim:
        running = streams(sim, 4)
        for stream in running:
            stream.wait_events(5)
        assert post(sim, "/sleep?level=1&mode=keep").status_code == 200
        generated = metric(sim, "vllm:generation_tokens_total")
        time.sleep(0.3)  # an observation window: ~60 steps of this engine
        assert metric(sim, "vllm:generation_tokens_total") == generated  # frozen
        assert not any(stream.done.is_set() for stream in running)
        reset, asleep = log_order(sim, RESET, ASLEEP)
        assert reset < asleep and WAITING not in sim.tail.text()  # keep waits for nothing
        assert post(sim, "/wake_up").status_code == 200
        for stream in running:
            events = stream.finish()
            assert events[-1] == "[DONE]" and content_tokens(stream) == LONG
            assert last_choice(stream)["finish_reason"] == "length"
        assert metric(sim, "vllm:num_preemptions_total") == 4
        fresh = Stream(sim, story("story number 0")).start()
        fresh.finish()
        assert fresh.text() == running[0].text()  # recomputed: nothing lost, nothing repeated


def test_keep_at_level_0_freezes_without_preempting() -> None:
    with running_sim(SLOW, DEV, speed=10) as sim:
        stream = Stream(sim, story()).start()
        stream.wait_events(5)
        assert post(sim, "/sleep?level=0&mode=keep").status_code == 200 and sleeping(sim)
        assert post(sim, "/wake_up?tags=scheduling").status_code == 200
        stream.finish()
        assert content_tokens(stream) == LONG and last_choice(stream)["finish_reason"] == "length"
        assert metric(sim, "vllm:num_preemptions_total") == 0
        assert RESET not in sim.tail.text() and ASLEEP not in sim.tail.text()


def test_a_bad_mode_changes_nothing() -> None:
    with running_sim(SLOW, DEV, speed=10) as sim:
        stream = Stream(sim, story()).start()
        stream.wait_events(5)
        refused = post(sim, "/sleep?mode=gentle")
        assert refused.status_code == 500
        assert refused.json()["error"]["message"] == "Call to sleep method failed: Invalid pause mode: gentle"
        stream.finish()
        assert content_tokens(stream) == LONG and last_choice(stream)["finish_reason"] == "length"
        assert not sleeping(sim)


def test_requests_sent_while_asleep_get_their_first_token_after_the_wake() -> None:
    """The paused scheduler queues them (measured: first token 0.03-0.05 s after the wake). A
    stream gets its headers at once and no chunk, not even the role, before its first token."""
    with running_sim(V026, DEV, speed=10) as sim:
        before = answer(sim, QUESTION)
        assert post(sim, "/sleep?level=1").status_code == 200
        streamed = Stream(sim, {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0})
        whole: dict[str, Any] = {}

        def ask() -> None:
            whole["response"] = chat(sim, QUESTION, timeout_s=60)
            whole["at"] = time.monotonic()

        asker = threading.Thread(target=ask)
        asker.start()
        streamed.start().wait_head()
        with pytest.raises(requests.Timeout):
            chat(sim, QUESTION, timeout_s=1.0)
        assert streamed.events == [] and "response" not in whole
        waking = time.monotonic()
        assert post(sim, "/wake_up").status_code == 200
        streamed.finish()
        asker.join(60)
        assert streamed.arrivals[0] > waking and whole["at"] > waking
        assert streamed.text() == before
        assert whole["response"].json()["choices"][0]["message"]["content"] == before


def test_a_reset_while_requests_hold_blocks_fails_unless_they_are_preempted() -> None:
    """`{"success": false}` while running requests hold blocks ("callers may retry"); with
    `reset_running_requests=true` they are preempted to the front of the queue, recompute, and
    finish (scheduler.py:2326-2370): the stream loses and repeats nothing."""
    with running_sim(SLOW, DEV, speed=10) as sim:
        body = story(CACHED, 200)
        stream = Stream(sim, body).start()
        stream.wait_events(3)
        refused = post(sim, "/reset_prefix_cache")
        assert refused.json() == {"success": False}
        assert log_line(
            sim, r"WARNING .*Failed to reset prefix cache because some blocks \(\d+\) are not freed yet"
        )
        bad = post(sim, "/reset_prefix_cache?reset_running_requests=maybe")
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "reset_running_requests"
        forced = post(sim, "/reset_prefix_cache?reset_running_requests=true")
        assert forced.json() == {"success": True}
        assert log_line(sim, r"\[block_pool\.py:790\] Successfully reset prefix cache")
        stream.finish()
        assert content_tokens(stream) == 200 and last_choice(stream)["finish_reason"] == "length"
        assert metric(sim, "vllm:num_preemptions_total") == 1
        again = Stream(sim, body).start()
        again.finish()
        assert again.text() == stream.text()


def test_the_first_sleep_names_the_backend_and_pins_the_host_buffers() -> None:
    """The lines of 0.26.0, in order: the pause's `Successfully reset prefix cache`, the worker's
    `Using sleep-mode backend: cumem` (its first sleep only), the pool and memory lines, then the
    executor's `It took S seconds to fall asleep.`, where the first sleep's pinning shows (2.7 s
    for 5.29 GiB on the H200, 0.14-0.17 s later). 100 GiB of weights at startup speed 100: the
    pinning takes ~0.48 s, a later sleep ~3 ms at speed 50."""
    args = [*V026, "--sim-weights-gib", "100", "--sim-gpu-memory-gib", "141"]
    with running_sim(args, {**DEV, "VLLM_SIM_STARTUP_SPEED": "100"}) as sim:
        for _ in range(2):
            assert post(sim, "/sleep?level=1").status_code == 200
            assert post(sim, "/wake_up").status_code == 200
        lines = [line for line in sim.tail.lines if "EngineCore" in line]
        texts = (
            RESET,
            "Using sleep-mode backend: cumem",
            "CuMemAllocator: sleep freed",
            "Sleep mode freed",
            ASLEEP,
        )
        found = [next(t for t in texts if t in line) for line in lines if any(t in line for t in texts)]
        assert found == [*texts, RESET, *texts[2:]]
        first, later = (
            float(m.group(1))
            for line in lines
            if (m := re.search(r"It took (\d+\.\d{6}) seconds to fall", line))
        )
        assert first > later
