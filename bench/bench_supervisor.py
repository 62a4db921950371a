"""Supervisor timings against the simulator (a benchmark, not a test):

- promote − ready: when `launch` records the promotion minus when `/health` first answered 200,
  compared with one tool-call round trip (goal: ≤ one tool-call round trip + 0.5 s without leak windows);
- death → reaction: SIGKILL of `VLLM::EngineCore` alone (the API server lives on until its watchdog,
  as vLLM's does) until the launcher notices it (`engine_died`'s `noticed_at_epoch`) — goal < 1 s;
- failed candidate → last-good start: the rejected candidate's gate verdict until last-good's start;
- the launcher's RSS while serving (goal < 60 MB).

Run: `.venv/bin/python bench/bench_supervisor.py [--runs 5]` from the repository root.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from launcher.supervisor.history import Event  # noqa: E402
from tests.launcher_run import Launcher, free_port, write_profile  # noqa: E402

TOOL_CALL = {
    "messages": [{"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "tool_choice": "auto", "max_tokens": 1024, "temperature": 0,
}  # fmt: skip


def ts(record: dict[str, str]) -> float:
    return datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def wait_health(url: str, deadline_s: float = 60.0) -> float:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if requests.get(url + "/health", timeout=0.5).status_code == 200:
                return time.time()
        except requests.RequestException:
            pass
        time.sleep(0.005)
    raise TimeoutError("server never became healthy")


def one_run(root: Path, speed: int) -> dict[str, float]:
    port = free_port()
    launcher = Launcher(root / "profiles", root / "state", "bench")
    (root / "profiles").mkdir(parents=True, exist_ok=True)
    args = {"sim_speed": speed, "sim_watchdog_s": 600}  # the API server outlives its engine core, as vLLM's
    write_profile(launcher.profiles, "bench", port, args=args,
                  gates={"tool_call": {"cases": ["auto", "required", "named", "no_tool", "auto_stream"]}})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        launcher.start()
        ready = wait_health(url)
        status = launcher.wait_phase("serving", 60)
        promoted = ts(next(r for r in launcher.history() if r["event"] == Event.PROMOTED))
        body = {**TOOL_CALL, "model": "sim"}
        started = time.perf_counter()
        requests.post(url + "/v1/chat/completions", json=body, timeout=30).raise_for_status()
        round_trip = time.perf_counter() - started
        rss = psutil.Process(launcher.proc.pid).memory_info().rss / 1e6  # type: ignore[union-attr]
        write_profile(launcher.profiles, "bench", port, args={**args, "sim_capture_fallback": True})
        launcher.signal(signal.SIGHUP)
        launcher.wait_for(lambda s: s.get("reload_seq") == 1, 60)
        history = launcher.history()
        verdict = ts([r for r in history if r["event"] == Event.GATES][-2])
        restart = ts([r for r in history if r["event"] == Event.START][-1])
        status = launcher.status()
        api_server = psutil.Process(int(status["engine_pid"]))
        core = next(c for c in api_server.children(recursive=True) if c.name() == "VLLM::EngineCore")
        killed = time.time()
        os.kill(core.pid, signal.SIGKILL)
        launcher.wait_exit(20)
        died_record = next(r for r in launcher.history() if r["event"] == Event.ENGINE_DIED)
        died = float(died_record["noticed_at_epoch"])
        return {
            "promote_minus_ready_s": promoted - ready,
            "tool_call_round_trip_s": round_trip,
            "failed_to_last_good_start_s": restart - verdict,
            "death_to_reaction_s": died - killed,
            "launcher_rss_mb": rss,
        }
    finally:
        launcher.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sim-speed", type=int, default=20)
    options = parser.parse_args()
    rows = []
    for index in range(options.runs):
        with tempfile.TemporaryDirectory(prefix="bench-supervisor-") as tmp:
            rows.append(one_run(Path(tmp), options.sim_speed))
        print(f"run {index + 1}/{options.runs}: " + ", ".join(f"{k}={v:.3f}" for k, v in rows[-1].items()))
    print(f"\nmedians over {options.runs} runs (sim speed {options.sim_speed}, {os.cpu_count()} CPUs):")
    for key in rows[0]:
        values = [row[key] for row in rows]
        print(f"  {key:<30} median {statistics.median(values):8.3f}   min {min(values):8.3f}   max {max(values):8.3f}")
    gate_budget = statistics.median(r["tool_call_round_trip_s"] for r in rows) + 0.5
    print(f"  goal promote − ready ≤ one tool-call round trip + 0.5 s = {gate_budget:.3f} s")


if __name__ == "__main__":
    main()
