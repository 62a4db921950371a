#!/usr/bin/env python3
"""Issue 31 on the GPU machine: what the real vLLM does when its processes hang, and what the
serving watch makes of it. Run by check-i31.sh (which sets PYTHONPATH); rehearsable on the simulator.

One launcher serves PROFILE; then, each on the promoted engine:
  core   SIGSTOP of VLLM::EngineCore (RUNS times): /health every 0.5 s, /metrics every 2 s and one
         completion with a 10 s deadline are recorded while the watch decides; the verdict's time,
         its incident bundle, the restart and the time until a new engine serves
  api    SIGSTOP of the API server, the same
  kill   SIGKILL of VLLM::EngineCore: how the death is named and which source named it (launch exits 5)
Everything goes to OUT/i31.json; one line per finding to OUT/summary.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import requests


def epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state = Path(args.state)
        self.out = Path(args.out)
        self.summary = self.out / "summary.txt"
        self.launcher: subprocess.Popen[bytes] | None = None

    def say(self, text: str) -> None:
        line = f"[i31] {text}"
        print(line, flush=True)
        with self.summary.open("a") as f:
            f.write(line + "\n")

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "profiles" / self.args.profile / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def history(self) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait(self, what: str, check: Any, timeout_s: float) -> Any:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            found = check()
            if found:
                return found
            if self.launcher is not None and self.launcher.poll() is not None and what != "exit":
                raise RuntimeError(f"launcher exited {self.launcher.returncode} while waiting for {what}")
            time.sleep(0.1)
        raise RuntimeError(f"no {what} within {timeout_s:g} s; status {self.status()}")

    def event_after(self, name: str, t0: float) -> dict[str, Any] | None:
        return next((r for r in self.history() if r["event"] == name and epoch(r["ts"]) >= t0), None)

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "launcher.cli",
            "--profiles-dir",
            self.args.profiles,
            "--state-dir",
            str(self.state),
            "--profile",
            self.args.profile,
        ]
        self.launcher = subprocess.Popen(
            cmd, stdout=(self.out / "launch.txt").open("wb"), stderr=subprocess.STDOUT
        )
        t0 = time.time()
        self.wait(
            "serving",
            lambda: (
                self.status().get("phase") == "serving"
                and self.status().get("launcher_pid") == self.launcher.pid
            ),
            600,
        )
        self.say(f"promoted after {time.time() - t0:.1f} s (the first start)")

    def engine_core(self, api: int) -> int:
        for child in psutil.Process(api).children(recursive=True):
            if " ".join(child.cmdline()).startswith("VLLM::EngineCore"):
                return child.pid
        raise RuntimeError(f"no VLLM::EngineCore under {api}")

    def base(self) -> str:
        return str(self.status().get("url") or f"http://127.0.0.1:{self.args.port}")


class Sampler(threading.Thread):
    """What a client sees while the engine hangs: /health, /metrics, one completion."""

    def __init__(self, base: str, model: str) -> None:
        super().__init__(daemon=True)
        self.base, self.model = base, model
        self.stop = threading.Event()
        self.health: list[tuple[float, int, float]] = []
        self.metrics: list[tuple[float, dict[str, float]]] = []
        self.completion: dict[str, Any] = {}
        self.t0 = time.time()

    def run(self) -> None:
        threading.Thread(target=self._complete, daemon=True).start()
        last_metrics = 0.0
        while not self.stop.wait(0.5):
            started = time.time()
            try:
                code = requests.get(self.base + "/health", timeout=2).status_code
            except requests.RequestException:
                code = 0
            self.health.append((round(started - self.t0, 2), code, round((time.time() - started) * 1000, 1)))
            if started - last_metrics >= 2:
                last_metrics = started
                self.metrics.append((round(started - self.t0, 2), read_metrics(self.base)))

    def _complete(self) -> None:
        time.sleep(1)
        sent = time.time()
        body = {"model": self.model, "prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}
        try:
            reply = requests.post(self.base + "/v1/completions", json=body, timeout=10)
            self.completion = {"status": reply.status_code, "seconds": round(time.time() - sent, 2)}
        except requests.RequestException as err:
            self.completion = {"error": type(err).__name__, "seconds": round(time.time() - sent, 2)}


def read_metrics(base: str) -> dict[str, float]:
    wanted = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens_total")
    try:
        text = requests.get(base + "/metrics", timeout=2).text
    except requests.RequestException as err:
        return {"error": type(err).__name__}  # type: ignore[dict-item]
    found: dict[str, float] = {}
    for line in text.splitlines():
        for name in wanted:
            if line.startswith(name + "{") or line.startswith(name + " "):
                found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


def stopped_run(run: Run, target: str, index: int) -> dict[str, Any]:
    status = run.status()
    api = int(status["engine_pid"])
    pid = run.engine_core(api) if target == "core" else api
    sampler = Sampler(run.base(), run.args.model)
    t0 = time.time()
    sampler.t0 = t0
    os.kill(pid, signal.SIGSTOP)
    sampler.start()
    wedged = run.wait("wedged", lambda: run.event_after("wedged", t0), 180)
    verdict_s = epoch(wedged["ts"]) - t0
    recovered = run.wait("recovered", lambda: run.event_after("recovered", t0), 600)
    sampler.stop.set()
    again_s = epoch(recovered["ts"]) - t0
    incident = Path(wedged["incident"]).read_text() if wedged.get("incident") else ""
    name = "VLLM::EngineCore" if target == "core" else "API server"
    run.say(
        f"{target} run {index}: SIGSTOP {name} {pid} -> wedged after {verdict_s:.1f} s by {wedged['check']}: "
        f"{wedged['detail']}; process: {wedged.get('process')}; action {wedged['action']}"
    )
    health = [h for h in sampler.health if h[0] < verdict_s]  # while it hung, before the watch acted
    codes = sorted({c for _, c, _ in health})
    slow = [ms for _, c, ms in health if c == 200]
    run.say(
        f"{target} run {index}: while stopped /health answered {codes} ({len(health)} reads, "
        f"200 in {min(slow, default=0):.1f}-{max(slow, default=0):.1f} ms); /metrics "
        f"{[m for m in sampler.metrics if m[0] < verdict_s][:3]}; the 10 s completion: {sampler.completion}"
    )
    run.say(
        f"{target} run {index}: serving again {again_s:.1f} s after the stop (restart: "
        f"{recovered.get('how')}); incident {len(incident.splitlines())} lines"
    )
    return {
        "target": target,
        "pid": pid,
        "verdict_s": round(verdict_s, 2),
        "serving_again_s": round(again_s, 2),
        "wedged": wedged,
        "recovered": recovered,
        "health": health,
        "metrics": sampler.metrics,
        "completion": sampler.completion,
        "incident": incident,
    }


def killed_run(run: Run) -> dict[str, Any]:
    core = run.engine_core(int(run.status()["engine_pid"]))
    t0 = time.time()
    os.kill(core, signal.SIGKILL)
    died = run.wait("engine_died", lambda: run.event_after("engine_died", t0), 60)
    assert run.launcher is not None
    code = run.launcher.wait(timeout=60)
    run.say(
        f'kill: SIGKILL VLLM::EngineCore {core} -> "{died["how"]}" (source {died.get("source")}) '
        f"noticed after {died['noticed_at_epoch'] - t0:.3f} s; launch exit {code} (5 expected)"
    )
    return {"target": "kill", "pid": core, "died": died, "exit": code}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("profiles", "state", "out", "profile", "model"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--port", type=int, default=8012)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", default="core,api,kill")
    args = ap.parse_args()
    run = Run(args)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    try:
        run.start()
        steps = args.steps.split(",")
        if "core" in steps:
            results += [stopped_run(run, "core", i + 1) for i in range(args.runs)]
            times = sorted(r["verdict_s"] for r in results)
            run.say(
                f"core: wedged after median {times[len(times) // 2]:.1f} s, max {times[-1]:.1f} s "
                f"(bound wedge_after x interval + timeout = 40 s)"
            )
        if "api" in steps:
            results.append(stopped_run(run, "api", 1))
        if "kill" in steps:
            results.append(killed_run(run))
    except Exception as err:  # the evidence so far still goes out
        run.say(f"stopped early: {type(err).__name__}: {err}")
    finally:
        (Path(args.out) / "i31.json").write_text(json.dumps(results, indent=1, default=str))
        if run.launcher is not None and run.launcher.poll() is None:
            run.launcher.send_signal(signal.SIGTERM)
            run.launcher.wait(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
