"""What each engine step publishes and who takes part in it, as the serving watch's stall rule reads
them (issue 42): a long chunked prefill moves `vllm:kv_cache_usage_perc` with every chunk before its
first token (vLLM allocates KV blocks per chunk and publishes SchedulerStats every step), and with
tensor parallelism one stopped `Worker_TPn` stops every stream and freezes /metrics, as vLLM's ranks
all run every step (vllm-facts.md §13, §17).

Real processes throughout: the simulator in its own session, real signals to its own children,
HTTP on loopback. Behaviour is judged, not the clock: waits have deadlines only a hang reaches.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tests.integration.sim_support import Stream, health, published, stopped, wait_status
from tests.simserver import HANG_S, running_sim, titled, wait_gone

pytestmark = pytest.mark.integration

KV = "vllm:kv_cache_usage_perc"
PROMPT = "vllm:prompt_tokens_total"
GENERATED = "vllm:generation_tokens_total"
ITERATIONS = "vllm:iteration_tokens_total_count"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
SUCCESS = "vllm:request_success_total"
ENGINE_FIGURES = (KV, PROMPT, GENERATED, ITERATIONS, RUNNING, WAITING, SUCCESS)
POLL_S = 0.1  # between two reads of /metrics: 50 steps of a running engine


def test_a_long_chunked_prefill_moves_kv_usage_with_each_chunk_before_its_first_token() -> None:
    """About 1,200 prompt tokens in chunks of 64, each chunk a slow step: every page of /metrics
    read before the first output shows the prompt and generation counters at 0 and the KV usage
    growing; vLLM observes no `iteration_tokens` for a step without output."""
    args = ["--max-num-batched-tokens", "64", "--sim-prefill-us-per-token", "2000", "--block-size", "16"]
    with running_sim(args, speed=1) as sim:
        body = {"messages": [{"role": "user", "content": "word " * 1200}], "max_tokens": 4}
        stream = Stream(sim, body).start()
        before_first_token = []
        for _ in range(int(HANG_S / 0.02)):  # polls until the first output; the count only ends a hang
            if (page := published(sim, ENGINE_FIGURES))[PROMPT] != 0:
                break
            before_first_token.append(page)
            time.sleep(0.02)
        else:
            pytest.fail("the prompt was never prefilled")
        assert all(p[GENERATED] == 0 and p[ITERATIONS] == 0 for p in before_first_token)
        usage = [p[KV] for p in before_first_token if p[RUNNING] == 1]
        assert usage == sorted(usage), "the usage only grows during the prefill"
        assert len(set(usage) - {0.0}) >= 3, f"the KV usage moved fewer than twice: {usage}"
        assert page[PROMPT] >= 1200 and page[ITERATIONS] >= 1
        # still running, it holds at least the prompt's blocks; on a loaded host the 4 tokens may be done
        # by this read, and a finished request's blocks are free again
        assert page[KV] >= max(usage) if page[RUNNING] == 1 else page[SUCCESS] >= 1
        assert stream.finish()[-1] == "[DONE]"


def test_a_stopped_tensor_parallel_worker_stops_every_stream_and_freezes_metrics_until_sigcont() -> None:
    """vLLM's engine core waits for its ranks every step: SIGSTOP of `Worker_TP1` alone stops the
    stream and everything the engine publishes while /health stays 200; SIGCONT resumes it."""
    body = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 1500,
            "ignore_eos": True}  # fmt: skip
    with running_sim(["--tensor-parallel-size", "2", "--sim-decode-ms", "20"], speed=10) as sim:  # 2 ms steps
        stream = Stream(sim, body).start()
        stream.wait_events(20)
        workers = titled(sim, "VLLM::Worker_TP1")  # the simulator's own child, not any on the host
        assert len(workers) == 1
        with stopped(workers[0]):
            seen: list[tuple[dict[str, float], int]] = []  # /metrics and the stream's events, poll by poll
            for _ in range(int(HANG_S / POLL_S)):  # until the step in flight lands; the count ends a hang
                if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
                    break
                assert not stream.done.is_set(), seen[-3:]
                time.sleep(POLL_S)
                seen.append((published(sim, ENGINE_FIGURES), len(stream.events)))
            else:
                pytest.fail(f"the figures never stood still: {seen[-3:]}")
            for _ in range(10):
                time.sleep(POLL_S)
                assert (published(sim, ENGINE_FIGURES), len(stream.events)) == seen[-1]
            assert seen[-1][0][RUNNING] == 1 and not stream.done.is_set() and health(sim) == 200
        events = stream.finish(timeout_s=HANG_S)
        content = [c for c in stream.chunks() if c["choices"] and c["choices"][0]["delta"].get("content")]
        assert events[-1] == "[DONE]" and len(content) == 1500
        assert published(sim, ENGINE_FIGURES)[GENERATED] == 1500


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_the_server_still_ends_whole_while_a_worker_is_stopped(signum: int) -> None:
    """The engine core blocked on a stopped worker still acts on its API server's shutdown (SIGTERM)
    and on its end (SIGKILL: the pipe closes), and leaves no process behind, the stopped worker
    included."""
    body = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 1500,
            "ignore_eos": True}  # fmt: skip
    with running_sim(["--tensor-parallel-size", "2", "--sim-decode-ms", "20"], speed=10) as sim:
        stream = Stream(sim, body).start()
        stream.wait_events(20)
        everyone = sim.descendants()
        (worker,) = titled(sim, "VLLM::Worker_TP1")
        os.kill(worker.pid, signal.SIGSTOP)
        wait_status(worker, psutil.STATUS_STOPPED)
        os.kill(sim.proc.pid, signum)
        assert sim.proc.wait(HANG_S) == (0 if signum == signal.SIGTERM else -signal.SIGKILL)
        assert wait_gone(everyone, HANG_S) == []
        assert stream.done.wait(HANG_S)
