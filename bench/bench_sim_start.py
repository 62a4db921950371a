"""What one `vllm-sim serve` start costs in CPU (a benchmark, not a test), before/after in paired runs.

One run: start `vllm-sim serve` at `--sim-startup-speed 1000` (the suite's speed), poll `/health`
from here until it answers 200, then SIGTERM the API server and reap it. Per run:
- `tree_cpu_s`: user+sys of the whole process tree over the whole cycle (start, healthy, stop),
  from `wait4` of the API server, which has reaped its engine core (what `/usr/bin/time` reports);
- `ready_cpu_s`: user+sys of the API server and its engine core at the moment `/health` said 200;
- `engine_ready_cpu_s`: the engine core's share of that (its spawn re-imports the `vllm-sim` script).
With `--before TREE` another checkout (e.g. `git archive BASE | tar -x -C /tmp/base`) runs first,
arms alternating `--runs` times through PYTHONPATH, so both see the same load; medians are printed.

Run: `.venv/bin/python bench/bench_sim_start.py --runs 5 --before /tmp/base` from the repository root.
"""

from __future__ import annotations

import argparse
import compileall
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.simserver import SIM, free_port, sim_env  # noqa: E402

DEADLINE_S = 120.0
REPO = Path(__file__).resolve().parent.parent


def compile_tree(tree: Path) -> None:
    """Bytecode cached as an installed package has it (the suite does the same: tests/bytecode.py)."""
    for package in ("vllm_flags", "vllm_sim"):
        compileall.compile_dir(tree / package, quiet=2)


def healthy(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:
        return False  # refused: not listening yet
    finally:
        connection.close()


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def one_run(tree: Path | None) -> dict[str, float]:
    port = free_port()
    env = sim_env({"PYTHONPATH": str(tree)} if tree is not None else {})
    argv = [str(SIM), "serve", "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not healthy(port):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"vllm-sim never answered /health 200 (exit {proc.poll()})")
            time.sleep(0.01)
        api = psutil.Process(proc.pid)
        engines = api.children()
        ready = cpu_s(api) + sum(cpu_s(child) for child in engines)
        engine = sum(cpu_s(child) for child in engines)
        proc.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    tree_cpu = usage.ru_utime + usage.ru_stime
    return {"tree_cpu_s": tree_cpu, "ready_cpu_s": ready, "engine_ready_cpu_s": engine}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another checkout, run beside this one")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    arms: dict[str, Path | None] = {"after": None}
    if options.before is not None:
        arms = {"before": options.before.resolve(), **arms}
    for tree in arms.values():
        compile_tree(tree or REPO)
    print(f"{options.runs} runs per arm, {os.cpu_count()} CPUs", flush=True)
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    for _ in range(options.runs):
        for name, tree in arms.items():
            rows[name].append(one_run(tree))
    results = {}
    for name, runs in rows.items():
        results[name] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        figures = "   ".join(f"{k} {v:.3f}" for k, v in results[name].items())
        print(f"  {name:<7} {figures}", flush=True)
    if options.json:
        print(json.dumps({"runs": rows, "medians": results}, indent=2))


if __name__ == "__main__":
    main()
