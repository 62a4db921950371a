"""The serving watch with real processes: the real `launch` serving the real simulator, whose
processes are stopped with real signals after promotion. A stopped process answers nothing while
its socket still accepts, exactly what a hung server does to its clients."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
import signal
import subprocess
from typing import Any

import psutil
import pytest

from tests.launcher_run import LAUNCH, LauncherFactory, append_table, free_port, write_profile

pytestmark = pytest.mark.integration

# A canary every second with a 1 s deadline: a hang is called within seconds, not minutes.
FAST_WATCH = {"canary_interval_s": 1, "canary_timeout_s": 1, "wedge_after": 2}


def events(launcher: Any) -> list[str]:
    return [str(r["event"]) for r in launcher.history()]


def record(launcher: Any, event: str) -> dict[str, Any]:
    return next(r for r in launcher.history() if r["event"] == event)


def wait_event(launcher: Any, event: str, timeout_s: float = 60.0) -> dict[str, Any]:
    launcher.wait_for(lambda _: event in events(launcher), timeout_s)
    return record(launcher, event)


def launch(*args: str, launcher: Any) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), "--profiles-dir", str(launcher.profiles), "--state-dir", str(launcher.state), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def api_server_of(status: dict[str, Any]) -> int:
    return int(status["engine_pid"])


def test_a_stopped_api_server_is_called_wedged_named_kept_as_evidence_and_restarted(
    launcher_factory: LauncherFactory,
) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor=FAST_WATCH)
    launcher.start()
    serving = launcher.wait_phase("serving")
    stopped = api_server_of(serving)
    os.kill(stopped, signal.SIGSTOP)
    wedged = wait_event(launcher, "wedged")
    assert wedged["verdict"] == "wedged" and wedged["action"] == "restart"
    assert wedged["check"] in ("canary", "health", "process")  # a miss, or stopped for stall_s: first wins
    assert "no answer within" in wedged["detail"] or "stopped (state T) for" in wedged["detail"]
    assert wedged["process"].startswith(f"API server pid {stopped} ")
    assert "stopped (state T)" in wedged["process"]
    incident = open(wedged["incident"]).read()
    assert f"API server pid {stopped}: state stopped" in incident  # each process, its state, its wchan
    assert "== the last 200 lines of" in incident and "Application startup complete." in incident
    recovered = wait_event(launcher, "recovered")
    assert recovered["how"] == "restart"
    again = launcher.wait_for(lambda s: s.get("phase") == "serving" and s.get("engine_pid") != stopped)
    assert not psutil.pid_exists(stopped) or psutil.Process(stopped).status() == psutil.STATUS_ZOMBIE
    assert again["watch"]["verdict"] == "serving"
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_with_on_wedge_log_the_status_says_wedged_exits_3_and_clears_when_it_answers_again(
    launcher_factory: LauncherFactory,
) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor={**FAST_WATCH, "on_wedge": "log"})
    launcher.start()
    stopped = api_server_of(launcher.wait_phase("serving"))
    os.kill(stopped, signal.SIGSTOP)
    try:
        wait_event(launcher, "wedged")
        shown = launch("status", "--profile", "svc", launcher=launcher)
        assert shown.returncode == 3, shown.stdout + shown.stderr
        assert shown.stdout.startswith("svc: serving, but the serving watch says wedged: not serving\n")
        assert "watch: wedged by" in shown.stdout and f"API server pid {stopped} " in shown.stdout
        assert "stopped (state T)" in shown.stdout  # "is stopped", or, after stall_s, "stopped ... for N s"
    finally:
        os.kill(stopped, signal.SIGCONT)
    launcher.wait_for(lambda s: (s.get("watch") or {}).get("verdict") == "serving", 60.0)
    shown = launch("status", "--profile", "svc", launcher=launcher)
    assert shown.returncode == 0 and shown.stdout.startswith("svc: serving\n"), shown.stdout
    assert launcher.status()["engine_pid"] == stopped  # logged, never restarted
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_check_live_is_a_liveness_probe_that_a_hung_server_fails(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor={"watch": False})
    launcher.start()
    stopped = api_server_of(launcher.wait_phase("serving"))
    live = launch("check", "--profile", "svc", "--live", "--timeout-s", "2", launcher=launcher)
    assert live.returncode == 0, live.stdout + live.stderr
    assert "PASS  health" in live.stdout and "PASS  canary" in live.stdout
    os.kill(stopped, signal.SIGSTOP)
    try:
        hung = launch("check", "--profile", "svc", "--live", "--timeout-s", "1", launcher=launcher)
    finally:
        os.kill(stopped, signal.SIGCONT)
    assert hung.returncode == 1 and "FAIL" in hung.stdout
    both = launch("check", "--profile", "svc", "--live", "--gates", "health", launcher=launcher)
    assert both.returncode == 2 and "--live" in both.stderr
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


# ---- the simulator's own faults, as vLLM 0.26 shows them (docs/vllm-facts.md §13-14) ----------


def engine_core_of(api: int) -> int:
    children = psutil.Process(api).children(recursive=True)
    pid: int = next(c.pid for c in children if " ".join(c.cmdline()).startswith("VLLM::EngineCore"))
    return pid


def test_a_stopped_engine_core_answers_health_200_and_is_called_wedged_by_name(
    launcher_factory: LauncherFactory,
) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), supervisor=FAST_WATCH)
    launcher.start()
    core = engine_core_of(api_server_of(launcher.wait_phase("serving")))
    os.kill(core, signal.SIGSTOP)
    wedged = wait_event(launcher, "wedged")
    assert wedged["process"].startswith(f"VLLM::EngineCore pid {core} ")
    assert "stopped (state T)" in wedged["process"]
    assert wedged["check"] in ("canary", "process")  # /health kept answering 200: never it
    wait_event(launcher, "recovered")
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_an_engine_core_that_hangs_after_some_requests_is_wedged(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(
        launcher.profiles,
        "svc",
        free_port(),
        args={"sim_hang_after_requests": 2},
        supervisor={**FAST_WATCH, "on_wedge": "log"},
    )  # fmt: skip  (2: the gates' tool calls)
    launcher.start()
    launcher.wait_phase("serving")
    wedged = wait_event(launcher, "wedged")
    assert wedged["check"] == "canary" and "no answer within 0.5 s (2 in a row)" in wedged["detail"]
    assert wedged["process"] is None  # every process runs: only the canary could tell (the one
    # sent at once after the first miss waits half the deadline)
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_an_engine_that_stalls_with_requests_running_is_wedged_by_the_figures_alone(
    launcher_factory: LauncherFactory,
) -> None:
    """No canary needs to miss: with the stream running, the frozen figures are the evidence (a
    canary every 60 s, so none is due in the time it takes)."""
    import requests

    port = free_port()
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", port, args={"sim_stall_after_tokens": 400},
                  supervisor={"canary_interval_s": 60, "canary_timeout_s": 60, "on_wedge": "log"})  # fmt: skip
    launcher.start()
    launcher.wait_phase("serving")
    body: dict[str, Any] = {
        "model": "sim", "prompt": "Tell a long story.", "max_tokens": 2000, "ignore_eos": True
    }
    with contextlib.suppress(requests.RequestException):  # it stalls mid-answer: no answer comes
        requests.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=3)
    wedged = wait_event(launcher, "wedged")
    assert wedged["check"] == "metrics" and wedged["detail"].startswith("1 requests running, 0 waiting, and")
    assert "nothing vLLM publishes moved for" in wedged["detail"] and "frozen_s" in wedged["figures"]
    assert "canary" not in [str(r.get("check")) for r in launcher.history()]  # no canary missed
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_requests_that_all_fail_while_health_says_200_are_failing(launcher_factory: LauncherFactory) -> None:
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), args={"sim_error_after_requests": 2},
                  supervisor={**FAST_WATCH, "on_wedge": "log"})  # fmt: skip
    launcher.start()
    launcher.wait_phase("serving")
    failing = wait_event(launcher, "failing")
    assert failing["check"] == "canary" and "HTTP 500" in failing["detail"]
    assert failing["figures"]["errors"] == 2  # two canaries, no more
    shown = launch("status", "--profile", "svc", launcher=launcher)
    assert shown.returncode == 3 and "watch: failing by canary" in shown.stdout
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_host_memory_that_runs_short_under_the_server_is_starving(launcher_factory: LauncherFactory) -> None:
    available_gib = psutil.virtual_memory().available / 2**30
    launcher = launcher_factory()
    path = write_profile(launcher.profiles, "svc", free_port(),
                         args={"sim_host_pressure_mib": 1536, "sim_host_pressure_s": 2},
                         supervisor={**FAST_WATCH, "on_wedge": "log"})  # fmt: skip
    append_table(path, "preflight", {"min_host_available_gib": round(available_gib - 0.3, 2)})
    launcher.start()
    launcher.wait_phase("serving")
    starving = wait_event(launcher, "starving", timeout_s=90)
    assert starving["check"] == "host_memory" and "GiB available <" in starving["detail"]
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_a_stopped_tensor_parallel_worker_is_wedged_by_name(launcher_factory: LauncherFactory) -> None:
    """Every rank takes part in every step: one stopped worker stops the engine, whatever answers."""
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(), args={"tensor_parallel_size": 2},
                  supervisor={"canary_interval_s": 60, "canary_timeout_s": 60, "on_wedge": "log"})  # fmt: skip
    launcher.start()
    api = api_server_of(launcher.wait_phase("serving"))
    worker = next(
        c.pid for c in psutil.Process(api).children(recursive=True) if "VLLM::Worker_TP1" in " ".join(c.cmdline())
    )
    os.kill(worker, signal.SIGSTOP)
    try:
        wedged = wait_event(launcher, "wedged")
    finally:
        os.kill(worker, signal.SIGCONT)
    assert wedged["check"] == "process"
    assert wedged["detail"].startswith(f"VLLM::Worker_TP1 pid {worker} stopped (state T) for ")
    assert wedged["detail"].endswith(": the engine cannot step")
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_hundreds_of_streams_queued_behind_a_full_batch_are_no_verdict(launcher_factory: LauncherFactory) -> None:
    """256 streams on max_num_seqs 4: every canary waits in vLLM's queue past its 1 s deadline, but
    the figures move all along, so the server is busy, not hung."""
    import requests

    port = free_port()
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", port, args={"max_num_seqs": 4}, supervisor=FAST_WATCH)
    launcher.start()
    launcher.wait_phase("serving")
    before = len(launcher.history())
    body: dict[str, Any] = {"model": "sim", "prompt": "Count.", "max_tokens": 24, "ignore_eos": True, "stream": True}

    def stream(_: int) -> int:
        with requests.post(f"http://127.0.0.1:{port}/v1/completions", json=body, stream=True, timeout=600) as r:
            return sum(1 for line in r.iter_lines() if line.startswith(b"data: {"))

    with ThreadPoolExecutor(max_workers=256) as pool:
        tokens = list(pool.map(stream, range(256)))
    assert tokens == [24] * 256  # every stream ran to its end
    seen = [str(r["event"]) for r in launcher.history()[before:]]
    assert not {"wedged", "failing", "starving"} & set(seen), seen
    status = launcher.wait_for(lambda s: s.get("phase") == "serving")
    assert status["watch"]["verdict"] in ("serving", "degraded")
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0


def test_tool_calls_that_go_bad_after_promotion_are_failing_though_plain_canaries_pass(
    launcher_factory: LauncherFactory,
) -> None:
    """The gates' two tool calls come out right; from then on every call names a function the request
    never offered. Every 2nd canary is a tool call: the plain ones between answer fine, and still
    two wrong tool calls in a row are failing."""
    launcher = launcher_factory()
    write_profile(launcher.profiles, "svc", free_port(),
                  args={"sim_tool_fault": "wrong-name", "sim_tool_fault_after_requests": 2},
                  supervisor={**FAST_WATCH, "canary_tool_call_every": 2, "on_wedge": "log"})  # fmt: skip
    launcher.start()
    launcher.wait_phase("serving")
    failing = wait_event(launcher, "failing")
    assert failing["check"] == "tool_call" and failing["figures"]["errors"] == 2
    assert failing["detail"].startswith("tool-call canary (auto): ") and "(2 in a row)" in failing["detail"]
    shown = launch("status", "--profile", "svc", launcher=launcher)
    assert shown.returncode == 3 and "watch: failing by tool_call" in shown.stdout
    launcher.signal(signal.SIGTERM)
    assert launcher.wait_exit() == 0
