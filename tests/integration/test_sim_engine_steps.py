"""What each engine step publishes, as the serving watch's stall rule reads it (issue 42): a long
chunked prefill moves `vllm:kv_cache_usage_perc` with every chunk before its first token (vLLM
allocates KV blocks per chunk and publishes SchedulerStats every step, vllm-facts.md §13).

Real processes throughout: the simulator in its own session, HTTP on loopback. Behaviour is judged,
not the clock: waits have deadlines only a hang reaches.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.sim_support import Stream, published
from tests.simserver import HANG_S, running_sim

pytestmark = pytest.mark.integration

KV = "vllm:kv_cache_usage_perc"
PROMPT = "vllm:prompt_tokens_total"
GENERATED = "vllm:generation_tokens_total"
ITERATIONS = "vllm:iteration_tokens_total_count"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
SUCCESS = "vllm:request_success_total"
ENGINE_FIGURES = (KV, PROMPT, GENERATED, ITERATIONS, RUNNING, WAITING, SUCCESS)


def test_a_long_chunked_prefill_moves_kv_usage_with_each_chunk_before_its_first_token() -> None:
    """About 1,200 prompt tokens in chunks of 64, each chunk a slow step: every page of /metrics
    read before the first output shows the prompt and generation counters at 0 and the KV usage
    growing; vLLM observes no `iteration_tokens` for a step without output."""
    args = ["--max-num-batched-tokens", "64", "--sim-prefill-us-per-token", "2000", "--block-size", "16"]
    with running_sim(args, speed=1) as sim:
        body = {"messages": [{"role": "user", "content": "word " * 1200}], "max_tokens": 4}
        stream = Stream(sim, body).start()
        before_first_token = []
        deadline = time.monotonic() + HANG_S
        while (page := published(sim, ENGINE_FIGURES))[PROMPT] == 0:
            before_first_token.append(page)
            assert time.monotonic() < deadline, "the prompt was never prefilled"
            time.sleep(0.02)
        assert all(p[GENERATED] == 0 and p[ITERATIONS] == 0 for p in before_first_token)
        usage = [p[KV] for p in before_first_token if p[RUNNING] == 1]
        assert usage == sorted(usage), "the usage only grows during the prefill"
        assert len(set(usage) - {0.0}) >= 3, f"the KV usage moved fewer than twice: {usage}"
        assert page[PROMPT] >= 1200 and page[ITERATIONS] >= 1 and page[KV] >= max(usage)
        assert stream.finish()[-1] == "[DONE]"
