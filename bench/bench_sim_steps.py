"""The simulator's own cost per token, before/after in paired runs (a benchmark, not a test).

Each engine step of vllm-sim waits for `VLLM::EngineCore` to run it (a grant over the pipe, sent
when the step starts and answered during its sleep: docs/simulator.md "The engine clock"). This
measures what that costs: N streaming clients, each asking for 64 tokens with `ignore_eos` again and
again for `--duration-s`, against vllm-sim at `--sim-speed` (1000: the steps are 12 us, so the
simulator's own work is the limit). Per arm: tokens per second the clients received, and the CPU the
API server and the engine core spent per 1,000 tokens. With `--before TREE` another checkout (e.g.
`git archive BASE | tar -x -C /tmp/base`) runs the same load first, arms alternating `--runs` times;
the medians are printed.

Run: `.venv/bin/python bench/bench_sim_steps.py --streams 1,64,256 --runs 3 --before /tmp/base`
(`--tensor-parallel-size 2`: the engine core also waits for its workers every step).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.simserver import running_sim  # noqa: E402

BODY = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 64, "ignore_eos": True,
        "stream": True}  # fmt: skip


async def load(url: str, streams: int, duration_s: float) -> int:
    """Streams chat requests from `streams` clients until the time is up; returns the chunks read."""
    chunks = 0
    end = time.monotonic() + duration_s
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client() -> None:
            nonlocal chunks
            while time.monotonic() < end:
                async with session.post(url + "/v1/chat/completions", json=BODY) as response:
                    async for line in response.content:
                        if line.startswith(b"data: {") and b'"role"' not in line:
                            chunks += 1  # one engine step's tokens (the role chunk comes first)

        await asyncio.gather(*(client() for _ in range(streams)))
    return chunks


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for proc in procs:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def one_arm(tree: Path | None, streams: int, speed: float, duration_s: float, tp: int) -> dict[str, float]:
    env = {"PYTHONPATH": str(tree)} if tree is not None else {}
    args = ["--disable-uvicorn-access-log", "--disable-log-stats", "--tensor-parallel-size", str(tp)]
    with running_sim(args, env, speed=speed) as sim:
        procs = [psutil.Process(sim.proc.pid), *sim.descendants()]
        asyncio.run(load(sim.url, min(streams, 4), 0.5))  # warm: imports, first connections
        before = cpu_s(procs)
        started = time.monotonic()
        tokens = asyncio.run(load(sim.url, streams, duration_s))
        wall = time.monotonic() - started
        spent = cpu_s(procs) - before
    return {"tok_s": tokens / wall, "cpu_ms_per_1k_tokens": 1000 * 1000 * spent / max(tokens, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1,64,256")
    parser.add_argument("--sim-speed", type=float, default=1000.0)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout, run beside this one")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    arms: dict[str, Path | None] = {"after": None}
    if options.before is not None:
        arms = {"before": options.before.resolve(), **arms}
    print(
        f"speed {options.sim_speed:g}, TP {options.tensor_parallel_size}, {options.duration_s:g} s per run, "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )
    results: dict[str, dict[str, dict[str, float]]] = {}
    for streams in (int(s) for s in options.streams.split(",")):
        rows: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
        for _ in range(options.runs):
            for name, tree in arms.items():
                rows[name].append(
                    one_arm(
                        tree, streams, options.sim_speed, options.duration_s, options.tensor_parallel_size
                    )
                )
        for name, runs in rows.items():
            median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            results.setdefault(str(streams), {})[name] = median
            figures = "   ".join(f"{k} {v:.1f}" for k, v in median.items())
            print(f"  {streams:>4} streams  {name:<7} {figures}", flush=True)
    if options.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
