"""What a rejected change costs clients (a benchmark, not a test): the outage of `launch set --apply`
(a SIGHUP reload) whose candidate the gates reject, on the demo-like profile at real simulator speed,
with `park = "stop"` (the serving engine stopped, last-good started cold after the rejection) and
with `park = "sleep"` (it sleeps beside the candidate and is woken).

A client asks production for a one-token completion every 10 ms (0.5 s deadline) from before the
reload until last-good answers again: `/health` is no measure here, vLLM answers it 200 while it
sleeps. Reported per run:
- outage: the time no completion was answered, summed over the gaps;
- beyond the candidate: the gates' rejection (its history record) → the first answer after it:
  what the rejected change costs beyond the candidate's own start and gates (the goal of park).
The sleeper's weights (`--sim-weights-gib`) set how long it takes to wake, as measured on the H200.

Run: `.venv/bin/python bench/bench_reject_outage.py --runs 3 --park stop sleep` from the repository root.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.shared_host import start_serving  # noqa: E402
from tests.launcher_run import Launcher, free_port, write_profile  # noqa: E402

DEMO_LIKE = {"sim_speed": 1, "sim_startup_speed": 10, "sim_weights_gib": 16, "max_num_seqs": 8, "max_model_len": 8192,
             "compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8]}}  # fmt: skip
ALL_CASES = {"tool_call": {"cases": ["auto", "required", "named", "no_tool", "auto_stream"]}}


def poll(url: str, stop: threading.Event, seen: list[tuple[float, bool]]) -> None:
    body = {"model": "sim", "prompt": "The capital of France is", "max_tokens": 1, "temperature": 0}
    with requests.Session() as session:
        while not stop.is_set():
            try:
                ok = session.post(url + "/v1/completions", json=body, timeout=0.5).status_code == 200
            except requests.RequestException:
                ok = False
            seen.append((time.time(), ok))
            time.sleep(0.01)


def outage(seen: list[tuple[float, bool]]) -> tuple[float, float, int]:
    """(seconds without a 200, first failure → last sample, number of gaps)."""
    down, gaps, first_fail, previous = 0.0, 0, None, None
    for when, ok in seen:
        if previous is not None and not previous[1]:
            down += when - previous[0]
        if not ok and (previous is None or previous[1]):
            gaps += 1
            first_fail = first_fail if first_fail is not None else when
        previous = (when, ok)
    return down, (seen[-1][0] - first_fail) if first_fail is not None else 0.0, gaps


def one_run(root: Path, park: str) -> dict[str, float]:
    port = free_port()
    supervisor = {"park": park, "park_port": free_port(), "watch": False}
    launcher = Launcher(root / "profiles", root / "state", "bench")
    (root / "profiles").mkdir(parents=True)
    write_profile(launcher.profiles, "bench", port, args=DEMO_LIKE, gates=ALL_CASES, supervisor=supervisor)
    url = f"http://127.0.0.1:{port}"
    stop, seen = threading.Event(), []
    poller = threading.Thread(target=poll, args=(url, stop, seen), daemon=True)
    try:
        start_serving(launcher, 120)
        poller.start()
        # a change only the gates reject: vLLM falls back to capture sizes [1, 2] (graph_capture fails)
        rejected = {**DEMO_LIKE, "sim_capture_fallback": True}
        write_profile(launcher.profiles, "bench", port, args=rejected, gates=ALL_CASES, supervisor=supervisor)
        launcher.signal(signal.SIGHUP)
        launcher.wait_for(lambda s: s.get("reload_seq") == 1 and s.get("phase") == "serving_last_good", 120)
        end = time.monotonic() + 30
        while not (seen and seen[-1][1]) and time.monotonic() < end:
            time.sleep(0.05)  # last-good serves: its first answer
        stop.set()
        poller.join(timeout=5)
        down, span, gaps = outage(seen)
        verdict = next(r for r in launcher.history() if r["event"] == "rejected")
        at = datetime.strptime(verdict["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
        back = next((when for when, ok in seen if ok and when > at), float("nan"))
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit(60)
        return {"outage_s": down, "beyond_candidate_s": back - at, "first_failure_to_last_good_s": span,
                "gaps": float(gaps)}  # fmt: skip
    finally:
        stop.set()
        launcher.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--park", nargs="+", choices=("stop", "sleep"), default=["stop", "sleep"])
    options = parser.parse_args()
    medians: dict[str, float] = {}
    for park in options.park:
        rows = []
        for index in range(options.runs):
            with tempfile.TemporaryDirectory(prefix="bench-outage-") as tmp:
                rows.append(one_run(Path(tmp), park))
            figures = ", ".join(f"{k}={v:.3f}" for k, v in rows[-1].items())
            print(f"park={park} run {index + 1}/{options.runs}: {figures}", flush=True)
        print(
            f"\npark={park}: {options.runs} runs, sim speed 1, {os.cpu_count()} CPUs, "
            f"load {os.getloadavg()[0]:.1f}:"
        )
        for key in rows[0]:
            values = [row[key] for row in rows]
            print(f"  {key:<30} min {min(values):7.3f}   median {statistics.median(values):7.3f}"
                  f"   max {max(values):7.3f}")  # fmt: skip
        medians[park] = statistics.median(row["beyond_candidate_s"] for row in rows)
    if {"stop", "sleep"} <= set(medians):
        print(f"\nbeyond the candidate, sleep / stop: {medians['sleep'] / medians['stop']:.3f}")


if __name__ == "__main__":
    main()
