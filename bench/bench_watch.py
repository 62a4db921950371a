"""The serving watch, measured (a benchmark, not a test): how fast a hang or a failure is called,
what watching costs, and that a full batch is no hang.

Scenarios, each against the real `launch` serving the simulator, the watch at its defaults unless
`--interval-s/--timeout-s` say otherwise (a canary every 15 s, a 10 s deadline, wedged after 2):
- `stop-core`  SIGSTOP of VLLM::EngineCore after promotion → `wedged` recorded (RUNS times)
- `stop-api`   SIGSTOP of the API server → `wedged` recorded (RUNS times)
- `fail`       every request answers 500 while /health says 200 (`--sim-fail-requests`) → `failing`
               recorded; the canaries it took
- `cost`       the launcher's CPU and RSS over `--duration-s` with the watch on and off, and the
               canaries sent (the simulator's own request counter)
- `load`       `--streams` concurrent streams at full batch for `--duration-s`: verdicts other than
               serving (goal: none)
Goals (issue 31): wedged within wedge_after × interval + timeout (40 s by default), failing within
2 canaries, ≤ 1 canary per interval, CPU < 1% of a core, RSS flat, 0 false verdicts under load.

Run: `.venv/bin/python bench/bench_watch.py stop-core stop-api fail --runs 5`,
     `.venv/bin/python bench/bench_watch.py cost --duration-s 600`,
     `.venv/bin/python bench/bench_watch.py load --streams 256 --duration-s 600`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.shared_host import start_serving  # noqa: E402
from tests.launcher_run import Launcher, free_port, write_profile  # noqa: E402

STREAM = {"model": "sim", "messages": [{"role": "user", "content": "Tell me a long story."}],
          "max_tokens": 256, "stream": True}  # fmt: skip


def epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def event_after(launcher: Launcher, name: str, t0: float) -> dict[str, Any] | None:
    return next((r for r in launcher.history() if r["event"] == name and epoch(r["ts"]) >= t0), None)


def wait_event(launcher: Launcher, name: str, t0: float, timeout_s: float) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        found = event_after(launcher, name, t0)
        if found is not None:
            return found
        time.sleep(0.05)
    raise RuntimeError(f"no {name} within {timeout_s:g} s")


def serve(root: Path, options: argparse.Namespace, args: dict[str, Any] | None = None,
          supervisor: dict[str, Any] | None = None) -> Launcher:  # fmt: skip
    profiles = root / "profiles"
    profiles.mkdir(parents=True, exist_ok=True)
    watch = {"canary_interval_s": options.interval_s, "canary_timeout_s": options.timeout_s}
    port = free_port()
    write_profile(profiles, "svc", port, args={"sim_speed": 1, **(args or {})},
                  supervisor={**watch, **(supervisor or {})})  # fmt: skip
    (profiles / "svc.toml").write_text((profiles / "svc.toml").read_text()
                                       + "\n[preflight]\nrestart_window_s = 1\nrestart_max_failures = 1000\n")
    launcher = Launcher(profiles, root / "state", "svc")
    launcher.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    start_serving(launcher)
    return launcher


def core_of(api: int) -> int:
    return next(c.pid for c in psutil.Process(api).children(recursive=True)
                if " ".join(c.cmdline()).startswith("VLLM::EngineCore"))  # fmt: skip


def stopped(options: argparse.Namespace, target: str) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        launcher = serve(Path(tmp), options)
        try:
            for _ in range(options.runs):
                status = launcher.wait_for(lambda s: s.get("phase") == "serving" and
                                           (s.get("watch") or {}).get("verdict") == "serving", 300)  # fmt: skip
                api = int(status["engine_pid"])
                pid = core_of(api) if target == "core" else api
                t0 = time.time()
                os.kill(pid, signal.SIGSTOP)
                wedged = wait_event(launcher, "wedged", t0, 180)
                times.append(epoch(wedged["ts"]) - t0)
                print(f"  SIGSTOP {target} {pid}: wedged after {times[-1]:.1f} s by {wedged['check']}", flush=True)
                wait_event(launcher, "recovered", t0, 300)
        finally:
            launcher.cleanup()
    return times


def failing(options: argparse.Namespace) -> list[dict[str, Any]]:
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        launcher = serve(Path(tmp), options, args={"sim_fail_requests": True}, supervisor={"on_wedge": "log"})
        try:
            for _ in range(options.runs):
                t0 = time.time()
                verdict = wait_event(launcher, "failing", t0, 180)
                found.append({"after_s": epoch(verdict["ts"]) - t0, "errors": verdict["figures"].get("errors")})
                print(f"  failing after {found[-1]['after_s']:.1f} s, {found[-1]['errors']} canaries", flush=True)
                wait_event(launcher, "watch", time.time(), 120)  # the log action: it stays failing; next run
        finally:
            launcher.cleanup()
    return found


def cpu_rss(pid: int, seconds: float) -> dict[str, float]:
    proc = psutil.Process(pid)
    before, rss0, t0 = proc.cpu_times(), proc.memory_info().rss, time.monotonic()
    time.sleep(seconds)
    after, rss1, took = proc.cpu_times(), proc.memory_info().rss, time.monotonic() - t0
    used = (after.user + after.system) - (before.user + before.system)
    return {"cpu_pct": round(100 * used / took, 3), "rss_mb_start": round(rss0 / 1e6, 1),
            "rss_mb_end": round(rss1 / 1e6, 1)}  # fmt: skip


def completions(url: str) -> float:
    text = requests.get(url + "/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('http_requests_total{handler="/v1/completions"'))  # fmt: skip


def cost(options: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for watch in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            launcher = serve(Path(tmp), options, supervisor={"watch": watch})
            try:
                url = str(launcher.url)  # type: ignore[attr-defined]
                sent0 = completions(url)
                assert launcher.proc is not None
                figures = cpu_rss(launcher.proc.pid, options.duration_s)
                figures["canaries"] = completions(url) - sent0
                result["watch on" if watch else "watch off"] = figures
                print(f"  watch {'on ' if watch else 'off'}: {figures}", flush=True)
            finally:
                launcher.cleanup()
    return result


def load(options: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        launcher = serve(Path(tmp), options, args={"max_num_seqs": options.streams})
        stop = threading.Event()
        done: list[int] = []
        try:
            url = str(launcher.url) + "/v1/chat/completions"  # type: ignore[attr-defined]

            def client() -> None:
                with requests.Session() as session:
                    while not stop.is_set():
                        try:
                            with session.post(url, json=STREAM, stream=True, timeout=120) as reply:
                                for _ in reply.iter_lines():
                                    pass
                            done.append(1)
                        except requests.RequestException:
                            time.sleep(0.1)

            threads = [threading.Thread(target=client, daemon=True) for _ in range(options.streams)]
            t0 = time.time()
            for thread in threads:
                thread.start()
            time.sleep(options.duration_s)
            stop.set()
            verdicts = [r for r in launcher.history() if epoch(r["ts"]) >= t0
                        and r["event"] in ("watch", "wedged", "failing", "starving")]  # fmt: skip
            shown = [(r["event"], r.get("verdict"), r.get("check")) for r in verdicts]
            bad = [v for v in shown if v[0] in ("wedged", "failing", "starving")]
            print(f"  {options.streams} streams, {len(done)} finished in {options.duration_s:g} s; "
                  f"verdict changes {shown}; final verdicts {len(bad)} (goal 0)", flush=True)
            return {"streams": options.streams, "finished": len(done), "changes": shown, "final": len(bad)}
        finally:
            stop.set()
            launcher.cleanup()


def summary(name: str, times: list[float]) -> dict[str, Any]:
    line = {"runs": [round(t, 1) for t in times], "median_s": round(statistics.median(times), 1),
            "max_s": round(max(times), 1)}  # fmt: skip
    print(f"{name}: median {line['median_s']} s, max {line['max_s']} s over {len(times)} runs", flush=True)
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+", choices=("stop-core", "stop-api", "fail", "cost", "load"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--interval-s", type=float, default=15.0)
    ap.add_argument("--timeout-s", type=float, default=10.0)
    ap.add_argument("--duration-s", type=float, default=600.0)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--json", type=Path, help="write the figures here")
    options = ap.parse_args()
    print(f"load average at start {os.getloadavg()}", flush=True)
    figures: dict[str, Any] = {"settings": vars(options) | {"json": None}}
    for scenario in options.scenarios:
        print(f"== {scenario}", flush=True)
        if scenario in ("stop-core", "stop-api"):
            figures[scenario] = summary(scenario, stopped(options, scenario.split("-")[1]))
        elif scenario == "fail":
            figures[scenario] = failing(options)
        elif scenario == "cost":
            figures[scenario] = cost(options)
        else:
            figures[scenario] = load(options)
    print(f"load average at end {os.getloadavg()}", flush=True)
    if options.json:
        options.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
