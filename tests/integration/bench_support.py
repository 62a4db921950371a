"""Run the real `launch bench` against a real vllm-sim, and read what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.simserver import HANG_S

LAUNCH = Path(sys.executable).with_name("launch")
SPEED = 50.0
# At --sim-speed 50: 2 ms decode steps (100 / 50) and 0.8 us of prefill per uncached token.
FAST = ["--sim-decode-ms", "100", "--disable-uvicorn-access-log", "--enable-prompt-tokens-details"]
SMALL = [
    "--contexts",
    "short",
    "--concurrency",
    "1,4",
    "--rounds",
    "3",
    "--prompts",
    "4",
    "--max-tokens",
    "48",
]


def launch_bench(
    args: list[str],
    out: Path,
    *,
    env: dict[str, str] | None = None,
    pre: list[str] | None = None,
    timeout_s: float = HANG_S,
) -> subprocess.CompletedProcess[str]:
    argv = [str(LAUNCH), *(pre or []), "bench", *args, "--out", str(out), "--no-plots"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)


def bench_json(url: str, out: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = launch_bench(["--url", url, "--json", *args], out, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    assert json.loads((out / "summary.json").read_text(encoding="utf-8")) == summary
    return summary


def cell(summary: dict[str, Any], context: str, concurrency: int) -> dict[str, Any]:
    return next(c for c in summary["cells"] if c["context"] == context and c["concurrency"] == concurrency)


def flags(entry: dict[str, Any]) -> set[str]:
    return {f["flag"] for f in entry["flags"]}


def requests_of(out: Path, **match: Any) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]
