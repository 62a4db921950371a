#!/usr/bin/env python3
"""Issue 32 on the GPU machine: what a rejected change costs with park = "sleep" and with "stop".

One launcher serves PROFILE; RUNS times a change its gates (or vLLM) reject is applied with
`launch set --apply` while a client asks production for a completion every 0.2 s. Recorded per run:
the outage a client saw (production stopped answering → answered again), the part of it beyond the
candidate's own start and gates (the rejection → answered again), sleep and wake seconds, the GPU
memory the sleeper kept (NVML, from the history), host RAM available before and while parked, and
whether production's greedy answer after the wake is the one before. After each run the file is
put back (`launch rollback`, which restarts nothing). Everything to OUT/i32-NAME.json, findings to
OUT/summary.txt. Rehearsable on the simulator (check-i32.sh).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import requests

PROMPT = "The capital of France is"


def epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


class Poller(threading.Thread):
    """A client of production: one short completion every 0.2 s; when it failed and when it came back."""

    def __init__(self, url: str, model: str) -> None:
        super().__init__(daemon=True)
        self.url, self.model = url, model
        self.stop = threading.Event()
        self.answers: list[tuple[float, bool]] = []

    def run(self) -> None:
        body = {"model": self.model, "prompt": PROMPT, "max_tokens": 2, "temperature": 0}
        while not self.stop.is_set():
            sent = time.time()
            try:
                ok = requests.post(self.url + "/v1/completions", json=body, timeout=2).status_code == 200
            except requests.RequestException:
                ok = False
            # a success counts when its answer came (a request sent to a sleeper waits for the wake),
            # a failure when it was sent
            self.answers.append((time.time() if ok else sent, ok))
            self.stop.wait(0.2)

    def outage(self, after: float) -> tuple[float | None, float | None]:
        """The longest run of failures after `after`: (its first failure, the first success after it)."""
        best: tuple[float | None, float | None] = (None, None)
        down: float | None = None
        for at, ok in self.answers:
            if at < after:
                continue
            if not ok and down is None:
                down = at
            elif ok and down is not None:
                if best[0] is None or best[1] is None or at - down > best[1] - best[0]:
                    best = (down, at)
                down = None
        if down is not None and best[0] is None:
            best = (down, None)  # still down at the end
        return best


class Session:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state = Path(args.state)
        self.out = Path(args.out)
        self.base = [
            sys.executable,
            "-m",
            "launcher.cli",
            "--profiles-dir",
            args.profiles,
            "--state-dir",
            str(self.state),
        ]
        self.launcher: subprocess.Popen[bytes] | None = None

    def say(self, text: str) -> None:
        line = f"[i32 {self.args.profile}] {text}"
        print(line, flush=True)
        with (self.out / "summary.txt").open("a") as f:
            f.write(line + "\n")

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "profiles" / self.args.profile / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def history(self, since: float) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        rows = (
            [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            if path.exists()
            else []
        )
        return [r for r in rows if epoch(r["ts"]) >= since]

    def launch(self, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=timeout_s)

    def start(self) -> float:
        t0 = time.time()
        log = (self.out / f"launch-{self.args.profile}.txt").open("wb")
        self.launcher = subprocess.Popen(
            [*self.base, "--profile", self.args.profile], stdout=log, stderr=subprocess.STDOUT
        )
        end = time.monotonic() + 900
        while time.monotonic() < end:
            status = self.status()
            if status.get("phase") == "serving" and status.get("launcher_pid") == self.launcher.pid:
                return time.time() - t0
            if self.launcher.poll() is not None:
                raise RuntimeError(f"launcher exited {self.launcher.returncode}")
            time.sleep(0.2)
        raise RuntimeError("not serving within 900 s")

    def greedy(self, url: str) -> str | None:
        body = {"model": self.args.model, "prompt": PROMPT, "max_tokens": 16, "temperature": 0}
        try:
            return str(
                requests.post(url + "/v1/completions", json=body, timeout=30).json()["choices"][0]["text"]
            )
        except (requests.RequestException, ValueError, KeyError, IndexError):
            return None

    def one_run(self, index: int) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.args.port}"
        before_text = self.greedy(url)
        available_before = psutil.virtual_memory().available
        poller = Poller(url, self.args.model)
        poller.start()
        time.sleep(1.0)
        t0 = time.time()
        done = self.launch("set", self.args.profile, self.args.change, "--tag", f"bad{index}", "--apply",
                           "--timeout-s", "900")  # fmt: skip
        end = time.monotonic() + 120
        while time.monotonic() < end and not (poller.answers and poller.answers[-1][1]):
            time.sleep(0.2)  # production answers again
        poller.stop.set()
        down, up = poller.outage(t0)
        rows = self.history(t0)
        by = {r["event"]: r for r in rows}
        rejected = next((r for r in rows if r["event"] == "rejected"), None)
        candidate = [r for r in rows if r["event"] == "start"]
        after_text = self.greedy(url)
        figures = {
            "run": index, "set_exit": done.returncode,
            "outage_s": round(up - down, 2) if down and up else None,
            "beyond_candidate_s": round(up - epoch(rejected["ts"]), 2) if up and rejected else None,
            "candidate_start_to_verdict_s": round(epoch(rejected["ts"]) - epoch(candidate[0]["ts"]), 2)
            if rejected and candidate else None,
            "sleep_s": by.get("parked", {}).get("seconds"), "wake_s": by.get("woken", {}).get("seconds"),
            "gpu_mib_awake": by.get("parked", {}).get("gpu_mib_awake"),
            "gpu_mib_asleep": by.get("parked", {}).get("gpu_mib_asleep"),
            "host_available_gib_before": round(available_before / 2**30, 2),
            "host_available_gib_parked": by.get("parked", {}).get("host_available_gib"),
            "greedy_same": before_text is not None and before_text == after_text,
            "greedy_before": before_text, "greedy_after": after_text,
            "events": [r["event"] for r in rows],
        }  # fmt: skip
        self.say(f"run {index}: set --apply exit {done.returncode}; outage {figures['outage_s']} s, beyond the "
                 f"candidate's start and gates {figures['beyond_candidate_s']} s; sleep {figures['sleep_s']} s, "
                 f"wake {figures['wake_s']} s; GPU {figures['gpu_mib_awake']} -> {figures['gpu_mib_asleep']} MiB; "
                 f"host RAM {figures['host_available_gib_before']} -> {figures['host_available_gib_parked']} GiB; "
                 f"greedy same: {figures['greedy_same']}")  # fmt: skip
        back = self.launch("rollback", f"bad{index}", "--profile", self.args.profile, "--timeout-s", "900")
        figures["rollback_exit"] = back.returncode
        return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("profiles", "state", "out", "profile", "model", "change"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    session = Session(args)
    results: dict[str, Any] = {"profile": args.profile, "change": args.change, "runs": []}
    try:
        results["cold_start_s"] = round(session.start(), 1)
        session.say(f"promoted after {results['cold_start_s']} s (cold start)")
        for index in range(1, args.runs + 1):
            results["runs"].append(session.one_run(index))
        beyond = [r["beyond_candidate_s"] for r in results["runs"] if r["beyond_candidate_s"] is not None]
        if beyond:
            session.say(f"beyond the candidate: median {statistics.median(beyond):.2f} s, max {max(beyond):.2f} s "
                        f"over {len(beyond)} runs")  # fmt: skip
    except Exception as err:  # the evidence so far still goes out
        session.say(f"stopped early: {type(err).__name__}: {err}")
    finally:
        (Path(args.out) / f"i32-{args.profile}.json").write_text(json.dumps(results, indent=1, default=str))
        if session.launcher is not None and session.launcher.poll() is None:
            session.launcher.send_signal(signal.SIGTERM)
            session.launcher.wait(timeout=180)
    return 0


if __name__ == "__main__":
    sys.exit(main())
