#!/usr/bin/env python3
"""Issue 41 on the GPU machine: changes under traffic through the front door, on the real vLLM 0.26.0.

`launch frontdoor` (Caddy) and `launch --profile P` run; eight clients stream completions through
the door without pause; then a change is applied with `launch set --apply`. Per change: requests,
failed requests (no 200), streams cut mid-answer (no finish, or finish_reason abort), the longest
wait a client saw (send → first token), and what the launcher recorded (drained, parked, woken, the
first sleep's seconds). Phases (argv): `sleep` — tiny-door, a change rejected late (the kernel
marker lost, 5 s after the candidate is up), the file put back, a change promoted, then the `keep`
test on the engine that serves; `stop` — tiny-door-stop, a change rejected late (last-good cold).

The `keep` test: four greedy streams of 1,200 tokens (ignore_eos) run uninterrupted, then again with
`/sleep?level=1&mode=keep` after ~300 tokens and `/wake_up` 4 s later; whether every resumed text
equals the uninterrupted one. Everything to OUT/i41-PHASE.json, findings to OUT/summary.txt.
Rehearsable on the simulator (check-i41.sh).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

STREAM = {"prompt": "the weather in paris is", "max_tokens": 96, "temperature": 0, "stream": True}
KEEP = {"prompt": "call the tool get_weather with city name", "max_tokens": 1200, "temperature": 0,
        "ignore_eos": True}


def epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


class Clients:
    """N clients streaming through `url`, each sending its next request when the last ended."""

    def __init__(self, url: str, model: str, count: int = 8) -> None:
        self.url, self.model, self.count = url, model, count
        self.stop = threading.Event()
        self.outcomes: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]

    def __enter__(self) -> Clients:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(900)

    def _run(self) -> None:
        with requests.Session() as session:
            while not self.stop.is_set():
                outcome = self._one(session)
                with self.lock:
                    self.outcomes.append(outcome)

    def _one(self, session: requests.Session) -> dict[str, Any]:
        sent = time.time()
        got: dict[str, Any] = {"sent": sent, "status": None, "tokens": 0, "finish": None, "done": False}
        try:
            body = {**STREAM, "model": self.model}
            with session.post(self.url + "/v1/completions", json=body, stream=True, timeout=900) as reply:
                got["status"] = reply.status_code
                if reply.status_code != 200:
                    got["error"] = reply.text[:200]
                    return got
                for line in reply.iter_lines():
                    if not line.startswith(b"data:"):
                        continue
                    got.setdefault("first", time.time())
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        got["done"] = True
                        continue
                    choice = (json.loads(data).get("choices") or [{}])[0]
                    got["tokens"] += 1
                    got["finish"] = choice.get("finish_reason") or got["finish"]
        except requests.RequestException as err:
            got["error"] = f"{type(err).__name__}: {err}"[:200]
        got["ended"] = time.time()
        return got

    def figures(self, since: float, until: float) -> dict[str, Any]:
        mine = [o for o in self.outcomes if since <= o["sent"] <= until]
        failed = [o for o in mine if o["status"] != 200]
        cut = [o for o in mine if o["status"] == 200 and not (o["done"] and o["finish"] in ("stop", "length"))]
        waits = [o["first"] - o["sent"] for o in mine if "first" in o]
        lasted = sorted(o["ended"] - o["sent"] for o in mine if "ended" in o)
        return {"requests": len(mine), "failed": len(failed), "cut": len(cut),
                "median_request_s": round(lasted[len(lasted) // 2], 2) if lasted else None,
                "longest_wait_s": round(max(waits, default=0.0), 2),
                "failed_examples": [o.get("error") for o in failed[:3]],
                "cut_examples": [{k: o.get(k) for k in ("tokens", "finish", "done", "error")} for o in cut[:3]]}


class Session:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state = Path(args.state)
        self.out = Path(args.out)
        self.base = [sys.executable, "-m", "launcher.cli", "--profiles-dir", args.profiles,
                     "--state-dir", str(self.state)]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.results: dict[str, Any] = {"profile": args.profile, "phases": {}}

    def say(self, text: str) -> None:
        line = f"[i41 {self.args.profile}] {text}"
        print(line, flush=True)
        with (self.out / "summary.txt").open("a") as f:
            f.write(line + "\n")

    def spawn(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        log = (self.out / f"{name}.txt").open("wb")
        proc = subprocess.Popen([*self.base, *argv], stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "profiles" / self.args.profile / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def history(self, since: float) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
        return [r for r in rows if epoch(r["ts"]) >= since]

    def wait_serving(self, launcher: subprocess.Popen[bytes], limit_s: float = 600) -> float:
        t0 = time.time()
        while time.time() - t0 < limit_s:
            status = self.status()
            if status.get("phase") in ("serving", "serving_last_good") and status.get("launcher_pid") == launcher.pid:
                return time.time() - t0
            if launcher.poll() is not None:
                raise RuntimeError(f"launcher exited {launcher.returncode}")
            time.sleep(0.2)
        raise RuntimeError(f"not serving within {limit_s:g} s")

    def change(self, name: str, *keys: str, tag: str) -> dict[str, Any]:
        """Apply the change with eight clients streaming through the door all along; every request
        the clients sent during the phase (before, during and after the change) is counted."""
        door_url = f"http://127.0.0.1:{self.args.door_port}"
        with Clients(door_url, self.args.model) as clients:
            time.sleep(5.0)  # traffic before
            t0 = time.time()
            done = subprocess.run([*self.base, "set", "--profile", self.args.profile, *keys, "--tag", tag,
                                   "--apply", "--timeout-s", "600"], capture_output=True, text=True, timeout=700)
            t1 = time.time()
            time.sleep(5.0)  # traffic after
        rows = self.history(t0)
        kinds = [str(r["event"]) for r in rows]
        pick = lambda event: next((r for r in rows if r["event"] == event), None)  # noqa: E731
        result = {"change": list(keys), "exit": done.returncode, "verdict": done.stdout.strip()[-300:],
                  "stderr": done.stderr.strip()[-600:], "seconds": round(t1 - t0, 2), "events": kinds,
                  "clients": clients.figures(0.0, time.time()), "drained": pick("drained"),
                  "parked": pick("parked"), "woken": pick("woken"), "wake_failed": pick("wake_failed")}
        self.results["phases"][name] = result
        c = result["clients"]
        self.say(f"{name}: exit {done.returncode} in {t1 - t0:.1f} s; clients {c['requests']} requests, "
                 f"{c['failed']} failed, {c['cut']} cut, longest wait {c['longest_wait_s']} s; "
                 f"drained {((result['drained'] or {}).get('left'))} left; events {kinds}")
        return result

    def rollback(self, tag: str) -> None:
        done = subprocess.run([*self.base, "rollback", tag, "--profile", self.args.profile, "--timeout-s", "600"],
                              capture_output=True, text=True, timeout=700)
        self.say(f"rollback {tag}: exit {done.returncode} {(done.stdout + done.stderr).strip()[-200:]}")

    def keep_test(self, port: int) -> None:
        """Four greedy streams, uninterrupted, then slept with mode=keep and woken: same texts?"""
        url = f"http://127.0.0.1:{port}"
        body = {**KEEP, "model": self.args.model}

        def four(after: float | None = None) -> list[str]:
            texts: list[str] = ["", "", "", ""]

            def one(i: int) -> None:
                reply = requests.post(url + "/v1/completions", json=body, timeout=600)
                texts[i] = reply.json()["choices"][0]["text"]

            threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            if after is not None:
                time.sleep(after)
                slept = requests.post(url + "/sleep?level=1&mode=keep", timeout=120).status_code
                time.sleep(4.0)
                woke = requests.post(url + "/wake_up", timeout=120).status_code
                self.results["keep_routes"] = {"sleep": slept, "wake_up": woke}
            for t in threads:
                t.join(600)
            return texts

        started = time.time()
        reference = four()
        took = time.time() - started
        interrupted = four(after=max(0.5, took * 0.25))
        same = [a == b for a, b in zip(reference, interrupted, strict=True)]
        prefix = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                  for a, b in zip(reference, interrupted, strict=True)]
        self.results["keep"] = {"same": same, "reference_chars": [len(t) for t in reference],
                                "resumed_chars": [len(t) for t in interrupted], "first_difference_at": prefix,
                                "uninterrupted_s": round(took, 2)}
        self.say(f"keep: resumed texts equal the uninterrupted ones: {same} (first difference at {prefix}; "
                 f"{len(reference[0])} chars, {took:.1f} s uninterrupted)")

    def stop_all(self) -> None:
        """End what this session started (the launcher first, then the door), each by its pid."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()

    def run(self) -> None:
        door = self.spawn("door", "frontdoor", "--profile", self.args.profile)
        launcher = self.spawn("launcher", "--profile", self.args.profile)
        started = self.wait_serving(launcher)
        self.say(f"serving in {started:.1f} s; door pid {door.pid}, alive {door.poll() is None}")
        try:
            if self.args.phase == "sleep":
                self.change("rejected_sleep", self.args.bad_change, tag="bad")
                self.rollback("bad")
                self.change("promoted_sleep", "max_num_seqs=16", tag="seqs")
                self.keep_test(self.args.park_port)  # a promoted parked change serves on park_port
            else:
                self.change("rejected_stop", self.args.bad_change, tag="bad")
        finally:
            self.stop_all()
            (self.out / f"i41-{self.args.phase}.json").write_text(json.dumps(self.results, indent=2, default=str))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profiles", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--phase", choices=("sleep", "stop"), required=True)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--door-port", type=int, default=8090)
    parser.add_argument("--park-port", type=int, default=8013)
    parser.add_argument("--bad-change", default="attention_backend=TRITON_ATTN")
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Session(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
