"""Sleep mode as vLLM 0.26.0 serves it (issue 32): the dev routes, the levels, the memory the log
reports, requests while asleep, and the wake-up faults. Real processes, HTTP on loopback."""

from __future__ import annotations

import re

import pytest
import requests

from tests.integration.sim_support import Stream, answer, chat, health, log_line, metric
from tests.simserver import SimHandle, running_sim

pytestmark = pytest.mark.integration

DEV = {"VLLM_SERVER_DEV_MODE": "1"}
V026 = ["--sim-vllm-version", "0.26", "--enable-sleep-mode"]
QUESTION = "What is 17 + 25?"
FREED = r"\[gpu_worker\.py:221\] Sleep mode freed ([\d.]+) GiB memory, ([\d.]+) GiB memory is still in use\."
# long enough for full prefix-cache blocks (16 tokens each)
CACHED = "Please read this long prompt about rivers, mountains, lakes and forests carefully, then say hello."


def post(sim: SimHandle, path: str, timeout_s: float = 30.0, **kw: object) -> requests.Response:
    return requests.post(sim.url + path, timeout=timeout_s, **kw)  # type: ignore[arg-type]


def sleeping(sim: SimHandle) -> bool:
    return bool(requests.get(sim.url + "/is_sleeping", timeout=30).json()["is_sleeping"])


def sleep_state(sim: SimHandle) -> tuple[float, float, float]:
    return tuple(  # type: ignore[return-value]
        metric(sim, "vllm:engine_sleep_state", f'sleep_state="{s}"')
        for s in ("awake", "weights_offloaded", "discard_all")
    )


def test_without_dev_mode_the_routes_do_not_exist() -> None:
    with running_sim(V026) as sim:
        for path in ("/sleep", "/wake_up", "/reset_prefix_cache", "/collective_rpc"):
            response = post(sim, path)
            assert (response.status_code, response.json()) == (404, {"detail": "Not Found"}), path
        assert requests.get(sim.url + "/is_sleeping", timeout=10).status_code == 404
        assert "SECURITY WARNING" not in sim.tail.text() and "Route: /sleep" not in sim.tail.text()


def test_level_1_sleeps_queues_requests_and_wakes_to_the_same_answers() -> None:
    with running_sim(V026, DEV) as sim:
        assert log_line(
            sim, r"WARNING .*\[__init__\.py:36\] SECURITY WARNING: Development endpoints are enabled!"
        )
        assert "Route: /sleep, Methods: POST" in sim.tail.text()
        before = answer(sim, QUESTION)
        assert sleep_state(sim) == (1, 0, 0) and not sleeping(sim)
        response = post(sim, "/sleep?level=1")
        assert (response.status_code, response.text) == (200, "")
        assert sleeping(sim) and sleep_state(sim) == (0, 1, 0) and health(sim) == 200
        freed, in_use = (float(x) for x in log_line(sim, FREED).groups())
        assert in_use == pytest.approx(1.62, abs=0.01) and freed == pytest.approx(72.0 - 1.62, abs=0.01)
        pool = r"\[cumem\.py:271\] CuMemAllocator: sleep freed [\d.]+ GiB memory in total, of which 14\.90"
        assert log_line(sim, pool + " GiB is backed up in CPU")
        assert log_line(sim, r"\[abstract\.py:327\] It took \d+\.\d{6} seconds to fall asleep\.")
        waiting = Stream(sim, {"messages": [{"role": "user", "content": QUESTION}], "temperature": 0}).start()
        waiting.wait_head()  # accepted, queued: no chunk while asleep (test_sim_sleep_requests.py)
        with pytest.raises(requests.Timeout):
            chat(sim, QUESTION, timeout_s=1.0)
        assert waiting.events == []
        woke = post(sim, "/wake_up")
        assert (woke.status_code, woke.text) == (200, "")
        assert log_line(sim, r"\[api_router\.py:38\] wake up the engine with tags: None")
        assert log_line(
            sim,
            r"\[abstract\.py:345\] It took \d+\.\d{6} seconds to wake up tags \{'weights', 'kv_cache'\}\.",
        )
        waiting.finish()
        assert waiting.text() == before and answer(sim, QUESTION) == before
        assert not sleeping(sim) and sleep_state(sim) == (1, 0, 0)


def test_level_2_answers_garbage_until_the_weights_are_reloaded() -> None:
    with running_sim(V026, DEV) as sim:
        before = answer(sim, QUESTION)
        assert post(sim, "/sleep?level=2").status_code == 200
        assert sleep_state(sim) == (0, 0, 1)
        assert log_line(sim, r"of which 0\.00 GiB is backed up in CPU")
        assert post(sim, "/wake_up").status_code == 200
        garbage = answer(sim, QUESTION)
        assert garbage != before and "42" not in garbage
        reload = post(sim, "/collective_rpc", json={"method": "reload_weights"})
        assert (reload.status_code, reload.json()) == (200, {"results": [None]})
        assert answer(sim, QUESTION) == before
        missing = post(sim, "/collective_rpc", json={})
        assert missing.status_code == 400
        assert missing.json()["error"] == {
            "message": "Missing 'method' in request body",
            "type": "Bad Request",
            "param": None,
            "code": 400,
        }


def test_level_0_pauses_only_and_tags_wake_in_parts() -> None:
    with running_sim(V026, DEV) as sim:
        assert post(sim, "/sleep?level=0").status_code == 200
        assert sleeping(sim) and sleep_state(sim) == (0, 0, 0)
        assert post(sim, "/wake_up").status_code == 200
        assert log_line(sim, r"WARNING .*\[abstract\.py:333\] Executor is not sleeping\.")
        assert not sleeping(sim) and "Sleep mode freed" not in sim.tail.text()
        assert post(sim, "/sleep?level=1").status_code == 200
        assert post(sim, "/wake_up?tags=weights").status_code == 200
        assert log_line(sim, r"wake up the engine with tags: \['weights'\]")
        assert log_line(sim, r"seconds to wake up tags \['weights'\]\.")
        assert sleeping(sim)  # the KV cache is still asleep: the scheduler waits
        assert post(sim, "/wake_up?tags=weights").status_code == 200
        assert log_line(sim, r"Tag weights is not in sleeping tags \{'kv_cache'\}")
        assert post(sim, "/wake_up?tags=kv_cache").status_code == 200
        assert not sleeping(sim) and answer(sim, QUESTION)


def test_the_residue_is_what_the_log_reports_for_the_gpu() -> None:
    """What a second server "on the same GPU" may count on: the log's still-in-use figure is the
    others' memory plus this sleeper's residue (1,656 MiB measured for 5.29 GiB of weights)."""
    args = [
        *V026,
        "--sim-weights-gib",
        "5.29",
        "--sim-gpu-memory-gib",
        "139.8",
        "--sim-free-memory-gib",
        "120",
    ]
    with running_sim([*args, "--gpu-memory-utilization", "0.5"], DEV) as sim:
        assert post(sim, "/sleep").status_code == 200
        freed, in_use = (float(x) for x in log_line(sim, FREED).groups())
        residue = in_use - (139.8 - 120)
        assert residue == pytest.approx(1656 / 1024, abs=0.01)
        assert freed == pytest.approx(0.5 * 139.8 - residue, abs=0.01)


def test_without_sleep_mode_enabled_a_sleep_frees_nothing() -> None:
    with running_sim(["--sim-vllm-version", "0.26"], DEV) as sim:
        assert post(sim, "/sleep").status_code == 200 and sleeping(sim)
        freed, in_use = (float(x) for x in log_line(sim, FREED).groups())
        assert (freed, in_use) == (0.0, 72.0)
        assert log_line(sim, r"sleep freed 0\.00 GiB memory in total")


def test_bad_level_and_bad_mode() -> None:
    with running_sim(V026, DEV) as sim:
        level = post(sim, "/sleep?level=deep")
        assert level.status_code == 400
        assert level.json()["error"]["message"] == "invalid literal for int() with base 10: 'deep'"
        mode = post(sim, "/sleep?mode=gentle")
        assert mode.status_code == 500
        assert mode.json() == {
            "error": {
                "message": "Call to sleep method failed: Invalid pause mode: gentle",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            }
        }
        assert log_line(sim, r"ERROR .*\[core\.py:1548\] Invocation of sleep method failed")
        assert log_line(sim, r"ValueError: Invalid pause mode: gentle")
        assert not sleeping(sim) and answer(sim, QUESTION)


def test_a_wake_up_that_fails_leaves_the_engine_asleep() -> None:
    with running_sim([*V026, "--sim-wake-fault", "fail"], DEV) as sim:
        assert post(sim, "/sleep").status_code == 200
        for _ in range(2):  # it fails every time
            woke = post(sim, "/wake_up")
            assert woke.status_code == 500
            assert woke.json()["error"]["type"] == "InternalServerError"
            assert woke.json()["error"]["message"].startswith("Call to wake_up method failed: ")
        assert log_line(sim, r"Invocation of wake_up method failed")
        assert sleeping(sim) and sleep_state(sim) == (0, 1, 0) and health(sim) == 200
        with pytest.raises(requests.Timeout):
            chat(sim, QUESTION, timeout_s=1.0)


def test_a_wake_up_that_never_answers() -> None:
    with running_sim([*V026, "--sim-wake-fault", "hang"], DEV) as sim:
        assert post(sim, "/sleep").status_code == 200
        with pytest.raises(requests.Timeout):
            post(sim, "/wake_up", timeout_s=1.0)
        with pytest.raises(requests.Timeout):
            requests.get(sim.url + "/is_sleeping", timeout=1.0)  # the engine core answers nothing now
        assert health(sim) == 200


def test_a_stale_prefix_cache_answers_garbage_until_it_is_reset() -> None:
    with running_sim([*V026, "--sim-wake-fault", "stale-cache"], DEV) as sim:
        before = answer(sim, CACHED)
        assert post(sim, "/sleep").status_code == 200 and post(sim, "/wake_up").status_code == 200
        stale = answer(sim, CACHED)
        assert stale != before and "Hello" not in stale
        assert answer(sim, "say hello") == "Hello!"  # what hits no stale block is fine
        reset = post(sim, "/reset_prefix_cache")
        assert (reset.status_code, reset.json()) == (200, {"success": True})
        assert log_line(sim, r"\[api_router\.py:39\] Resetting prefix cache\.\.\.")
        assert log_line(sim, r"\[block_pool\.py:790\] Successfully reset prefix cache")
        assert answer(sim, CACHED) == before


def test_033_answers_with_json_bodies() -> None:
    with running_sim(["--enable-sleep-mode"], DEV) as sim:
        assert post(sim, "/sleep?level=1").json() == {"status": "sleeping", "level": 1}
        assert post(sim, "/wake_up").json() == {"status": "awake", "tags": None}


def test_a_dev_mode_value_vllm_cannot_read_stops_the_server() -> None:
    from tests.simserver import kill_group, start_sim

    sim = start_sim(V026, {"VLLM_SERVER_DEV_MODE": "yes"})
    try:
        assert sim.proc.wait(20) == 1
        assert re.search(r"ValueError: invalid literal for int\(\) with base 10: 'yes'", sim.drained())
    finally:
        kill_group(sim)
