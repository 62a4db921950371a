"""The launcher's own memory and CPU while it serves a busy engine (a benchmark, not a test).

Two loads, each against the real `launch` supervising the simulator after promotion:
- `--lines-per-s 1000`: a chatty engine (bench/chatty_engine.py: the simulator plus a steady
  stream of vLLM 0.26 access and stats lines). Goal: launcher RSS < 60 MB, CPU < 3% of a core.
- `--streams 256`: 256 concurrent streaming chat requests, each client starting the next as soon as
  one ends. Goal: launcher RSS < 60 MB (issue 14: for 15 minutes, `--duration-s 900`).
With `--before TREE` the same load runs first against a launcher importing another checkout
(e.g. `git archive BASE | tar -x -C /tmp/base`), then against this one.

Run: `.venv/bin/python bench/bench_livelog.py --lines-per-s 1000 --duration-s 240 --before /tmp/base`.
"""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.shared_host import start_serving  # noqa: E402
from tests.launcher_run import Launcher, free_port, write_profile  # noqa: E402

HERE = Path(__file__).resolve().parent
STREAM_BODY = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 64,
               "stream": True, "model": "sim"}  # fmt: skip


def chatty_command(root: Path, lines_per_s: float) -> str:
    """A `vllm-sim` wrapper (the name makes the launcher accept the simulator's flags)."""
    wrapper = root / "bin" / "vllm-sim"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "chatty_engine.py"} {lines_per_s} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def stream_forever(url: str, stop: threading.Event, done: list[int]) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            try:
                with session.post(url, json=STREAM_BODY, stream=True, timeout=60) as reply:
                    for _ in reply.iter_lines():
                        pass
                done.append(1)
            except requests.RequestException:
                time.sleep(0.1)


def one_arm(root: Path, options: argparse.Namespace, tree: Path | None) -> dict[str, float]:
    port = free_port()
    launcher = Launcher(root / "profiles", root / "state", "bench")
    (root / "profiles").mkdir(parents=True)
    args = {"sim_speed": options.sim_speed, "max_num_seqs": max(4, options.streams)}
    path = write_profile(launcher.profiles, "bench", port, args=args)
    if options.lines_per_s:
        command = f'command = ["{chatty_command(root, options.lines_per_s)}", "serve"]'
        path.write_text(path.read_text().replace('command = ["vllm-sim", "serve"]', command))
    env = dict(os.environ)
    if tree is not None:  # PYTHONPATH comes before the editable install's finder
        os.environ["PYTHONPATH"] = str(tree)
    stop, done = threading.Event(), [0]
    try:
        start_serving(launcher)
        os.environ.clear()
        os.environ.update(env)
        proc = psutil.Process(launcher.proc.pid)  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        clients = [threading.Thread(target=stream_forever, args=(url, stop, done), daemon=True)
                   for _ in range(options.streams)]  # fmt: skip
        for client in clients:
            client.start()
        first_rss = proc.memory_info().rss / 1e6
        cpu0, wall0 = sum(proc.cpu_times()[:2]), time.monotonic()
        peak = first_rss
        end = wall0 + options.duration_s
        while time.monotonic() < end:
            time.sleep(1.0)
            peak = max(peak, proc.memory_info().rss / 1e6)
        cpu = (sum(proc.cpu_times()[:2]) - cpu0) / (time.monotonic() - wall0) * 100
        last_rss = proc.memory_info().rss / 1e6
        stop.set()
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit(60)
        logs = (launcher.state / "profiles" / "bench" / "logs").glob("engine.log*")
        lines = sum(p.read_bytes().count(b"\n") for p in logs)
        return {"rss_at_promotion_mb": first_rss, "rss_at_end_mb": last_rss, "rss_peak_mb": peak,
                "cpu_percent_of_a_core": cpu, "requests_done": float(len(done) - 1),
                "engine_log_lines": float(lines)}  # fmt: skip
    finally:
        os.environ.clear()
        os.environ.update(env)
        stop.set()
        launcher.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines-per-s", type=float, default=0.0)
    parser.add_argument("--streams", type=int, default=0)
    parser.add_argument("--duration-s", type=float, default=240.0)
    parser.add_argument("--sim-speed", type=float, default=20.0, help="simulator speed")
    parser.add_argument("--before", type=Path, help="another checkout, run first under the same load")
    options = parser.parse_args()
    arms: dict[str, Path | None] = {"after": None}
    if options.before is not None:
        arms = {"before": options.before.resolve(), **arms}
    load = f"{options.lines_per_s:g} lines/s" if options.lines_per_s else f"{options.streams} streams"
    print(f"load: {load} for {options.duration_s:g} s per arm, {os.cpu_count()} CPUs", flush=True)
    for name, tree in arms.items():
        with tempfile.TemporaryDirectory(prefix="bench-livelog-") as tmp:
            row = one_arm(Path(tmp), options, tree)
        print(f"  {name:<7} " + "   ".join(f"{k} {v:.1f}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
