"""Gate overhead at real simulator speed, before/after in paired runs (a benchmark, not a test).

promote − ready: when `launch` records the promotion minus when `/health` first answered 200. The
chain is the tool_call gate with all five cases (plus the log gates, already decided at ready), so
the figure is the launcher's own work plus the tool-call round trips. Goal: ≤ one tool-call round
trip + 0.5 s. Each run starts one launcher from this tree and, with `--before TREE`, one from
another checkout (e.g. `git archive BASE | tar -x -C /tmp/base`), alternating, so both see the same
machine load. `--sim-speed 1` is the simulator's model of a real GPU's timing (docs/simulator.md).

Run: `.venv/bin/python bench/bench_gate_overhead.py --runs 5 --before /tmp/base` from the repository root.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_supervisor import TOOL_CALL, ts  # noqa: E402
from bench.shared_host import PREFLIGHT_REFUSED  # noqa: E402
from launcher.supervisor.history import Event  # noqa: E402
from tests.launcher_run import Launcher, free_port, write_profile  # noqa: E402

ALL_CASES = ["auto", "required", "named", "no_tool", "auto_stream"]


def wait_health_of(launcher: Launcher, url: str, deadline_s: float) -> float | None:
    """When /health first answered 200, or None if the launcher exited before (preflight refused)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if requests.get(url + "/health", timeout=0.5).status_code == 200:
                return time.time()
        except requests.RequestException:
            pass
        if launcher.proc is not None and launcher.proc.poll() is not None:
            return None
        time.sleep(0.005)
    raise TimeoutError(f"server never became healthy:\n{launcher.output()}")


def one_run(root: Path, speed: float, tree: Path | None) -> dict[str, float]:
    """One start → promotion; on a shared host a foreign vLLM orphan can make preflight refuse, and
    then the start is tried again (for about ten minutes)."""
    for attempt in range(300):
        result = try_run(root / f"try-{attempt}", speed, tree)
        if result is not None:
            return result
        time.sleep(2)
    raise RuntimeError("preflight refused 300 times: foreign vLLM orphans on this host?")


def try_run(root: Path, speed: float, tree: Path | None) -> dict[str, float] | None:
    """One start → promotion of a launcher importing `tree` (None: this checkout)."""
    port = free_port()
    launcher = Launcher(root / "profiles", root / "state", "bench")
    (root / "profiles").mkdir(parents=True, exist_ok=True)
    write_profile(launcher.profiles, "bench", port, args={"sim_speed": speed},
                  gates={"tool_call": {"cases": ALL_CASES}})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    saved = os.environ.get("PYTHONPATH")
    if tree is not None:  # PYTHONPATH comes before the editable install's finder
        os.environ["PYTHONPATH"] = str(tree)
    try:
        launcher.start()
    finally:
        if tree is not None:
            os.environ.pop("PYTHONPATH") if saved is None else os.environ.update(PYTHONPATH=saved)
    try:
        ready = wait_health_of(launcher, url, deadline_s=300)
        if ready is None:
            if launcher.wait_exit(10) == PREFLIGHT_REFUSED:
                return None
            raise RuntimeError(f"launcher exited before ready:\n{launcher.output()}")
        launcher.wait_phase("serving", 300)
        promoted = ts(next(r for r in launcher.history() if r["event"] == Event.PROMOTED))
        started = time.perf_counter()
        body = {**TOOL_CALL, "model": "sim"}
        requests.post(url + "/v1/chat/completions", json=body, timeout=60).raise_for_status()
        round_trip = time.perf_counter() - started
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit(60)
        return {"promote_minus_ready_s": promoted - ready, "tool_call_round_trip_s": round_trip}
    finally:
        launcher.cleanup()


def summary(name: str, rows: list[dict[str, float]]) -> None:
    for key in rows[0]:
        values = [row[key] for row in rows]
        print(f"  {name:<7} {key:<24} min {min(values):6.3f}   median {statistics.median(values):6.3f}"
              f"   max {max(values):6.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sim-speed", type=float, default=1.0)
    parser.add_argument("--before", type=Path, help="another checkout to run paired with this one")
    options = parser.parse_args()
    arms: dict[str, Path | None] = {"after": None}
    if options.before is not None:
        arms = {"before": options.before.resolve(), **arms}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    for index in range(options.runs):
        for name, tree in arms.items():
            with tempfile.TemporaryDirectory(prefix="bench-gates-") as tmp:
                rows[name].append(one_run(Path(tmp), options.sim_speed, tree))
            print(f"run {index + 1}/{options.runs} {name}: "
                  + ", ".join(f"{k}={v:.3f}" for k, v in rows[name][-1].items()), flush=True)  # fmt: skip
    print(f"\n{options.runs} paired runs, sim speed {options.sim_speed:g}, {os.cpu_count()} CPUs:")
    for name in arms:
        summary(name, rows[name])
    budget = statistics.median(r["tool_call_round_trip_s"] for r in rows["after"]) + 0.5
    print(f"  goal promote − ready ≤ one tool-call round trip + 0.5 s = {budget:.3f} s")


if __name__ == "__main__":
    main()
