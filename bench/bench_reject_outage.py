"""What a rejected change costs clients (a benchmark, not a test): the outage of `launch set --apply`
(a SIGHUP reload) whose candidate the gates reject, on the demo-like profile at real simulator speed.

A client polls `/health` every 10 ms from before the reload until last-good serves again. Reported:
- outage: the time `/health` did not answer 200, summed over the gaps (the old engine stopped, the
  candidate starting, its rejection, last-good starting);
- span: first failed poll → `serving_last_good`; the candidate's own serving (200s between gaps)
  shows as the difference.
The serving engine is stopped before the candidate starts: one GPU set holds one model.

Run: `.venv/bin/python bench/bench_reject_outage.py --runs 3` from the repository root.
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
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.shared_host import start_serving  # noqa: E402
from tests.launcher_run import Launcher, free_port, write_profile  # noqa: E402

DEMO_LIKE = {"sim_speed": 1, "sim_weights_gib": 16, "max_num_seqs": 8, "max_model_len": 8192,
             "compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8]}}  # fmt: skip
ALL_CASES = {"tool_call": {"cases": ["auto", "required", "named", "no_tool", "auto_stream"]}}


def poll(url: str, stop: threading.Event, seen: list[tuple[float, bool]]) -> None:
    with requests.Session() as session:
        while not stop.is_set():
            try:
                ok = session.get(url + "/health", timeout=0.5).status_code == 200
            except requests.RequestException:
                ok = False
            seen.append((time.monotonic(), ok))
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


def one_run(root: Path) -> dict[str, float]:
    port = free_port()
    launcher = Launcher(root / "profiles", root / "state", "bench")
    (root / "profiles").mkdir(parents=True)
    write_profile(launcher.profiles, "bench", port, args=DEMO_LIKE, gates=ALL_CASES)
    url = f"http://127.0.0.1:{port}"
    stop, seen = threading.Event(), []
    poller = threading.Thread(target=poll, args=(url, stop, seen), daemon=True)
    try:
        start_serving(launcher, 120)
        poller.start()
        # a change only the gates reject: vLLM falls back to capture sizes [1, 2] (graph_capture fails)
        rejected = {**DEMO_LIKE, "sim_capture_fallback": True}
        write_profile(launcher.profiles, "bench", port, args=rejected, gates=ALL_CASES)
        launcher.signal(signal.SIGHUP)
        launcher.wait_for(lambda s: s.get("reload_seq") == 1 and s.get("phase") == "serving_last_good", 120)
        stop.set()
        poller.join(timeout=5)
        down, span, gaps = outage(seen)
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit(60)
        return {"outage_s": down, "first_failure_to_last_good_s": span, "gaps": float(gaps)}
    finally:
        stop.set()
        launcher.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    rows = []
    for index in range(options.runs):
        with tempfile.TemporaryDirectory(prefix="bench-outage-") as tmp:
            rows.append(one_run(Path(tmp)))
        figures = ", ".join(f"{k}={v:.3f}" for k, v in rows[-1].items())
        print(f"run {index + 1}/{options.runs}: {figures}", flush=True)
    print(f"\n{options.runs} runs, sim speed 1, {os.cpu_count()} CPUs:")
    for key in rows[0]:
        values = [row[key] for row in rows]
        print(f"  {key:<30} min {min(values):7.3f}   median {statistics.median(values):7.3f}"
              f"   max {max(values):7.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
