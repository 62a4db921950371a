"""Benchmark the log parser on a large vLLM log and compare with `grep -E`.

    .venv/bin/python bench/bench_logparse.py [--shape steady|restart-loop] [--size-mb 200] [--runs 3]
                                             [--file PATH] [--keep] [--parser-root DIR]

Shapes: `steady` (below) and `restart-loop`: the recorded real logs of tests/data/real-vllm-0.26
concatenated until the size is reached, as a `Restart=always` unit's journal holds them (many
startups, tracebacks, ANSI-free real 0.26 text with the logo's non-ASCII glyphs).

Each parse runs in a child process, as `launch parse-log FILE` does it (facts only), so its peak
resident memory (ru_maxrss) is measured too; wall and CPU seconds are both reported because the
machine may be shared. `--parser-root` points the child at another checkout (a before/after figure).

The log is generated (not committed): a TP4 0.33-style startup (tqdm bars with `\\r` redraws,
per-rank lines, the V2 profiling capture) followed by a server's steady state, which is what makes
logs big: periodic stats lines, uvicorn access lines, request logs, spec-decode metrics, the odd
per-rank or warning line. The parser reads the file exactly as `launch parse-log` does
(`parse_file`: 4 MiB chunks fed to `LogStream`). Medians of `--runs` runs are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from launcher.logfacts import parse_file  # noqa: E402

GREP_PATTERN = (
    r"KV cache size|Maximum concurrency|Capturing CUDA graphs|Graph capturing finished|init engine"
    r"|Application startup complete|version [0-9]|Free memory on device|Engine core initialization failed"
    r"|CUDA out of memory|Address already in use"
)

_API = "(APIServer pid=4101) INFO 11-29 {t} [{src}] {msg}"
_EC = "(Worker_TP{r} pid={pid}) INFO 11-29 {t} [{src}] {msg}"


def _startup(rng: random.Random) -> list[str]:
    t = "06:25:47"
    out = [
        _API.format(t=t, src="startup.py:38", msg="vLLM server version 0.33.0, serving model Qwen/Qwen3-32B"),
        _API.format(t=t, src="startup.py:96", msg="non-default args: {'model_tag': 'Qwen/Qwen3-32B', "
                    "'port': 8100, 'model': 'Qwen/Qwen3-32B', 'tensor_parallel_size': 4, "
                    "'max_num_seqs': 32}"),
        _API.format(t=t, src="model.py:2170", msg="Using max model len 40960"),
        "(EngineCore pid=4312) INFO 11-29 06:26:01 [core.py:139] Initializing a V1 LLM engine (v0.33.0) "
        "with config: model='Qwen/Qwen3-32B', tensor_parallel_size=4, enforce_eager=False, "
        "compilation_config={'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
        "'cudagraph_capture_sizes': [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64], "
        "'max_cudagraph_capture_size': 64}",
    ]
    for r in range(4):
        out.append(_EC.format(r=r, pid=4400 + r, t="06:26:05", src="model_runner.py:399",
                              msg="Loading model from scratch..."))
    out.append("\r".join(f"Loading safetensors checkpoint shards: {i * 20}% Completed | {i}/5 [00:0{i}<00:00]"
                         for i in range(6)))
    for r in range(4):
        out.append(_EC.format(r=r, pid=4400 + r, t="06:26:20", src="model_runner.py:428",
                              msg="Model loading took 15.27 GiB memory and 14.81 seconds"))
    for phase_total in (11, 2, None):
        if phase_total is None:
            for r in range(4):
                out.append(_EC.format(r=r, pid=4400 + r, t="06:26:58", src="gpu_worker.py:772",
                                      msg=f"Available KV cache memory: {24 + rng.random():.2f} GiB"))
            out.append("(EngineCore pid=4312) INFO 11-29 06:26:59 [kv_cache_utils.py:1147] GPU KV cache "
                       "size: 412,160 tokens, Maximum concurrency for 40,960 tokens per request: 10.06x")
            continue
        for desc, total in (("PIECEWISE", 11), ("FULL", phase_total)):
            out.append("\r".join(f"Capturing CUDA graphs ({desc}): {i * 100 // total}%|#| {i}/{total} [00:01]"
                                 for i in range(total + 1)))
    for desc in ("PIECEWISE", "FULL"):
        out.append("\r".join(f"Capturing CUDA graphs ({desc}): {i * 100 // 11}%|#| {i}/11 [00:01]"
                             for i in range(12)))
    for r in range(4):
        out.append(_EC.format(r=r, pid=4400 + r, t="06:27:07", src="model_runner.py:1163",
                              msg="Graph capturing finished in 7 secs, took 0.62 GiB"))
    out += [
        "(EngineCore pid=4312) INFO 11-29 06:27:08 [core.py:405] init engine (profile, create kv cache, "
        "warmup model) took 47.92 s (compilation: 27.45 s)",
        _API.format(t="06:27:11", src="entry.py:139", msg="Starting vLLM server on http://0.0.0.0:8100"),
        "INFO:     Started server process [4101]", "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
    ]
    return out


def _steady(rng: random.Random) -> str:
    r = rng.random()
    clock = f"{rng.randrange(7, 23):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
    if r < 0.30:
        return _API.format(t=clock, src="loggers.py:335", msg=(
            f"Engine 000: Avg prompt throughput: {rng.random() * 4000:.1f} tokens/s, Avg generation "
            f"throughput: {rng.random() * 900:.1f} tokens/s, Running: {rng.randrange(33)} reqs, Waiting: 0 "
            f"reqs, GPU KV cache usage: {rng.random() * 90:.1f}%, Prefix cache hit rate: "
            f"{rng.random() * 90:.1f}%"))
    if r < 0.80:
        path = rng.choice(("/v1/chat/completions", "/v1/chat/completions", "/health", "/metrics"))
        method = "POST" if path == "/v1/chat/completions" else "GET"
        return f'INFO:     127.0.0.1:{rng.randrange(30000, 65000)} - "{method} {path} HTTP/1.1" 200 OK'
    if r < 0.93:
        return _API.format(t=clock, src="logger.py:43", msg=(
            f"Received request chatcmpl-{rng.getrandbits(64):016x}: params: SamplingParams(n=1, "
            f"temperature=0.7, top_p=0.8, max_tokens={rng.randrange(64, 2048)}), prompt_token_ids: None, "
            "lora_request: None."))
    if r < 0.98:
        return _API.format(t=clock, src="metrics.py:120", msg=(
            f"SpecDecoding metrics: Mean acceptance length: {1 + rng.random():.2f}, Accepted throughput: "
            f"{rng.random() * 300:.2f} tokens/s, Drafted throughput: {rng.random() * 400:.2f} tokens/s, "
            f"Accepted: {rng.randrange(5000)} tokens, Drafted: {rng.randrange(6000)} tokens, Per-position "
            f"acceptance rate: 0.820, Avg Draft acceptance rate: {rng.random() * 100:.1f}%"))
    if r < 0.995:
        return _EC.format(r=rng.randrange(4), pid=4400, t=clock, src="custom_all_reduce.py:211",
                          msg=f"Registering {rng.randrange(9000)} cuda graph addresses")
    return (f"(APIServer pid=4101) WARNING 11-29 {clock} [protocol.py:88] The following fields were present "
            "in the request but ignored: {'chat_template_kwargs'}")


def generate(path: Path, size_mb: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    target = size_mb * 1024 * 1024
    written = 0
    lines = 0
    with open(path, "w", encoding="utf-8") as out:
        block = "\n".join(_startup(rng)) + "\n"
        out.write(block)
        written += len(block.encode())
        lines += block.count("\n")
        while written < target:
            block = "\n".join(_steady(rng) for _ in range(5000)) + "\n"
            out.write(block)
            written += len(block)
            lines += 5000
    return lines


REAL_LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "real-vllm-0.26"

_CHILD = """
import resource, sys, time, json
sys.path.insert(0, sys.argv[1])
from launcher.logfacts import parse_file
t, c = time.perf_counter(), time.process_time()
try:
    facts, _ = parse_file(sys.argv[2], events=False)
except TypeError:  # a checkout from before `events=`
    facts, _ = parse_file(sys.argv[2])
wall, cpu = time.perf_counter() - t, time.process_time() - c
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"wall": wall, "cpu": cpu, "rss_mb": rss_mb,
                  "startups": facts.startups_seen, "outcome": facts.outcome,
                  "outcomes": getattr(facts, "startup_outcomes", None)}))
"""


def generate_restart_loop(path: Path, size_mb: int) -> int:
    one_pass = b"".join(p.read_bytes() for p in sorted(REAL_LOGS.glob("*.log")))
    target = size_mb * 1024 * 1024
    with open(path, "wb") as out:
        written = 0
        while written < target:
            out.write(one_pass)
            written += len(one_pass)
    return written


def _child_parse(root: Path, path: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(root), str(path)], capture_output=True,
                         text=True, check=True, timeout=3600)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _time(fn: object, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=("steady", "restart-loop"), default="steady")
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--file", type=Path, help="use (or create) this log instead of a temp file")
    ap.add_argument("--keep", action="store_true", help="keep the generated temp file")
    ap.add_argument("--parser-root", type=Path, default=Path(__file__).resolve().parents[1],
                    help="checkout whose launcher/logfacts is measured (default: this one)")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-logparse-"))
    path = args.file or workdir / f"{args.shape}-vllm.log"
    if not path.exists() or path.stat().st_size < args.size_mb * 1024 * 1024:
        start = time.perf_counter()
        (generate if args.shape == "steady" else generate_restart_loop)(path, args.size_mb)
        print(f"generated {path} in {time.perf_counter() - start:.1f} s")
    size = path.stat().st_size
    with open(path, "rb") as handle:
        n_lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 24), b""))
    if args.shape == "steady":
        facts, _ = parse_file(path)
        assert (facts.kv_cache_tokens, facts.graphs_captured, facts.outcome) == (412160, 22, "ready"), facts
    samples = [_child_parse(args.parser_root, path) for _ in range(args.runs)]
    wall = statistics.median(float(s["wall"]) for s in samples)  # type: ignore[arg-type]
    cpu = statistics.median(float(s["cpu"]) for s in samples)  # type: ignore[arg-type]
    rss = max(float(s["rss_mb"]) for s in samples)  # type: ignore[arg-type]
    rows = [("logfacts parse_file", wall)]
    grep = shutil.which("grep")
    if grep:
        env = {**os.environ, "LC_ALL": "C"}
        rows.append(("grep -E -c (main patterns)", _time(
            # stdout must be a pipe: GNU grep stops at the first match when it writes to /dev/null
            lambda: subprocess.run([grep, "-E", "-c", GREP_PATTERN, str(path)], env=env, check=False,
                                   capture_output=True), args.runs)))
    mb = size / 1e6
    print(f"\nshape {args.shape}, parser {args.parser_root}; file: {mb:.0f} MB, {n_lines:,} lines; "
          f"median of {args.runs} runs on {os.cpu_count()} CPUs; load avg {os.getloadavg()[0]:.1f}\n")
    print(f"{'tool':30s} {'seconds':>8s} {'MB/s':>8s} {'lines/s':>12s} {'x grep':>7s}")
    for name, secs in rows:
        ratio = secs / rows[-1][1] if grep else float("nan")
        print(f"{name:30s} {secs:8.2f} {mb / secs:8.1f} {n_lines / secs:12,.0f} {ratio:7.2f}")
    print(f"\nparser CPU time {cpu:.2f} s ({mb / cpu:.1f} MB/s of CPU); peak RSS {rss:.0f} MB; "
          f"startups {samples[-1]['startups']}; outcomes {samples[-1]['outcomes']}")
    if not args.keep and not args.file:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
