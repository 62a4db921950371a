"""How exact is `launch bench`'s client? Measured against vllm-sim's ground truth, beside other tools.

    .venv/bin/python bench/bench_accuracy.py [--levels 1,8,64,256] [--tokens 128] \
        [--tools ours,guidellm,aiperf] [--json]

Starts vllm-sim (speed 1: 12 ms decode steps + 0.08 ms per running sequence) with
`--sim-ground-truth`, sends the same workload at each concurrency (short prompts from the bench
corpus, `max_tokens` = --tokens with `ignore_eos`, so every request streams exactly that many
tokens), and prints the median absolute error of TTFT and ITL against the ground truth, and the
client's CPU per stream. GuideLLM and aiperf, when installed in their own venvs (`--guidellm-venv`,
default /tmp/bench-tools; `--aiperf-venv`, default /tmp/aiperf-venv; see accuracy_tools.py), run the
same workload against the same simulator; a tool that is missing or fails is reported with why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from accuracy_tools import run_external  # noqa: E402
from truth import Errors, load  # noqa: E402

from launcher.bench.client import Client  # noqa: E402
from launcher.bench.exchange import Phase, Tag  # noqa: E402
from launcher.bench.record import build_record  # noqa: E402
from launcher.bench.workload import ContextSpec, Workload  # noqa: E402
from tests.simserver import running_sim  # noqa: E402

MODEL = "Qwen/Qwen3-8B"


def prompts(n: int) -> list[str]:
    work = Workload("accuracy", n)
    return [p.text for p in work.prompt_set(ContextSpec("short", 0))]


def body(text: str, tokens: int) -> bytes:
    return json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": text}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": tokens,
            "ignore_eos": True,
            "temperature": 0.7,
        },
        ensure_ascii=False,
    ).encode()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def ours(url: str, level: int, requests: int, tokens: int, texts: list[str]) -> dict[str, Any]:
    async with Client(url) as client:
        # one warm request per connection first, so the timed round measures streaming, not connects
        await asyncio.gather(
            *(
                client.stream(
                    "/v1/chat/completions", body(texts[0], 2), Tag(Phase.WARMUP, "acc"), f"warm-{level}-{i}"
                )
                for i in range(level)
            )
        )
        jobs = iter(range(requests))
        exchanges = []
        cpu0, t0 = _cpu(), time.monotonic()

        async def worker() -> None:
            for i in jobs:
                tag = Tag(Phase.TIMED, "acc", level, 1, i % len(texts))
                exchanges.append(
                    await client.stream(
                        "/v1/chat/completions", body(texts[i % len(texts)], tokens), tag, f"acc-{level}-{i}"
                    )
                )

        await asyncio.gather(*(worker() for _ in range(level)))
        cpu_stream, wall = _cpu() - cpu0, time.monotonic() - t0
        cpu1 = _cpu()
        records = [build_record(e) for e in exchanges]
        cpu_parse = _cpu() - cpu1
    chunks = sum(len(e.chunks) for e in exchanges)
    return {
        "records": records,
        "cpu_stream_s": cpu_stream,
        "cpu_parse_s": cpu_parse,
        "wall_s": wall,
        "chunks": chunks,
    }


def compare(records: list[Any], truth_path: Path) -> dict[str, Any]:
    rows = load(truth_path)
    errors = Errors()
    for record in records:
        times = list(record.event_times)
        errors.add(
            rows.get(record.response_id or ""),
            t_send=record.t_send,
            first=times[0] if times else 0.0,
            chunks=times,
        )
    return errors.summary()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,64,256")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--requests-per-level", type=int, default=0, help="default: max(16, 2 x c)")
    parser.add_argument("--tools", default="ours,guidellm,aiperf")
    parser.add_argument("--guidellm-venv", default="/tmp/bench-tools")
    parser.add_argument("--aiperf-venv", default="/tmp/aiperf-venv")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    tools = args.tools.split(",")
    texts = prompts(16)
    results: list[dict[str, Any]] = []
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-accuracy-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    for level in levels:
        n = args.requests_per_level or max(16, 2 * level)
        for tool in tools:
            truth = work / f"truth-{tool}-c{level}.jsonl"
            sim_args = [
                "--sim-ground-truth",
                str(truth),
                "--disable-uvicorn-access-log",
                "--max-model-len",
                "4096",
            ]
            with running_sim(sim_args, speed=1.0, model=MODEL, log_dir=work) as sim:
                if tool == "ours":
                    out = asyncio.run(ours(sim.url, level, n, args.tokens, texts))
                    row = compare(out["records"], truth)
                    row["cpu_ms_per_stream"] = out["cpu_stream_s"] * 1000 / n
                    row["cpu_us_per_chunk"] = out["cpu_stream_s"] * 1e6 / max(1, out["chunks"])
                    row["parse_ms_per_stream"] = out["cpu_parse_s"] * 1000 / n
                else:
                    venv = Path(args.guidellm_venv if tool == "guidellm" else args.aiperf_venv)
                    row = run_external(tool, venv, sim.url, MODEL, level, n, args.tokens, texts, truth, work)
            row.update({"tool": tool, "concurrency": level})
            results.append(row)
            print(_line(row), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _line(row: dict[str, Any]) -> str:
    if row.get("error"):
        return f"{row['tool']:>9} c{row['concurrency']:<4} not run: {row['error']}"
    return (
        f"{row['tool']:>9} c{row['concurrency']:<4} n={row['requests']:<4} TTFT |err| median "
        f"{_fmt(row['ttft_mae_ms'])} ms (p90 {_fmt(row['ttft_p90_abs_ms'])})  ITL |err| median "
        f"{_fmt(row['itl_mae_ms'])} ms (p90 {_fmt(row['itl_p90_abs_ms'])})  ITL-mean |err| "
        f"{_fmt(row.get('itl_mean_mae_ms'))} ms  vs-sim-TTFT {_fmt(row.get('vs_sim_ttft_mae_ms'), 1)} ms  "
        f"delivery {_fmt(row.get('delivery_median_ms'))} ms  intake {_fmt(row.get('intake_median_ms'), 1)} "
        "ms "
        f"cpu/stream {_fmt(row.get('cpu_ms_per_stream'), 2)} ms  chunk counts off {row['count_mismatch']}"
    )


if __name__ == "__main__":
    sys.exit(main())
