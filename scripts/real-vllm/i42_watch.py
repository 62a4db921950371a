#!/usr/bin/env python3
"""Issue 42 on the GPU machine: does the serving watch tell the truth in seconds, under traffic?
Run by check-i42.sh (which sets PYTHONPATH); rehearsable on the simulator.

One launcher serves tiny-hang (tiny, eager, max_num_seqs 4, V1 runner, hang_lp.py's logits
processor; `on_wedge = "restart"`), and the modes run against it, in this order for `all`:
  prefill  the engine idle, one long prompt (max_model_len - 8 token ids, 16-token chunks) streamed
           for one token while /metrics and the engine core's CPU seconds are read every 50 ms:
           which series moved before the first output token (the facts for a stall rule)
  queue    32 clients for 60 s on 4 slots (long streams, and short 4-token requests whose wait for
           their first token is the queue's): every watch record in the window; no verdict expected
  soft     the flag file of hang_lp.py set: the engine core blocks in a logits processor (state S);
           idle (the next canary meets it) and with 4 long streams started just before; RUNS each
  stop     SIGSTOP of VLLM::EngineCore (found under status.json's engine_pid, never by name): idle
           and with 4 streams; RUNS each
Per fault run: the fault's time, each stream's tokens and last token, the verdict's record (check,
detail, figures, process, action, incident), seconds from the fault to the verdict, /metrics,
/health and the engine core's state and CPU every 0.5 s meanwhile, then the fault removed at once
(the flag deleted; SIGCONT where the watch did not restart the engine) and the time until it serves
again (a restart, or with `on_wedge = "log"` the watch's `serving`). Everything to OUT/i42.json
(written after each run), one line per finding to OUT/summary.txt. Only history.jsonl, status.json
and the incident bundles of the launcher are read, so any version of the watch can be measured.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import requests
from i42_series import CPU, SERIES, moved, moving, read_series, spread  # this script's folder is on sys.path

MODES = ("prefill", "queue", "soft", "stop")  # the order of `all`: the cheap ones first
FINAL = ("wedged", "failing", "starving")  # the watch's verdicts that act (launcher/supervisor/history.py)
VERDICT_WAIT_S = 180.0
SERVING_WAIT_S = 300.0
STREAM_TIMEOUT_S = 600.0
CORE_TITLE = "VLLM::EngineCore"


def epoch(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


class Stream:
    """One streamed completion over its own connection: when each chunk came. `cut()` (from another
    thread) shuts the socket, which ends a read that waits on a hung engine."""

    def __init__(self, host: str, port: int, body: dict[str, Any]) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=STREAM_TIMEOUT_S)
        self.body = body
        self.sent: float | None = None
        self.times: list[float] = []
        self.status: int | None = None
        self.finish: str | None = None
        self.done = False
        self.error: str | None = None
        self.ended: float | None = None

    def run(self) -> None:
        try:
            self.sent = time.time()
            headers = {"Content-Type": "application/json"}
            self.conn.request("POST", "/v1/completions", body=json.dumps(self.body), headers=headers)
            reply = self.conn.getresponse()
            self.status = reply.status
            if reply.status != 200:
                self.error = reply.read(300).decode("utf-8", "replace")
                return
            self._read(reply)
        except (OSError, http.client.HTTPException, ValueError) as err:
            self.error = f"{type(err).__name__}: {err}"[:200]
        finally:
            self.ended = time.time()
            self.conn.close()

    def _read(self, reply: http.client.HTTPResponse) -> None:
        for raw in reply:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.done = True
                return
            now, chunk = time.time(), json.loads(data)
            if "error" in chunk:  # vLLM's error event in the stream (its engine died): not a token
                self.error = json.dumps(chunk["error"])[:200]
                continue
            if chunk.get("choices"):
                self.times.append(now)
                self.finish = chunk["choices"][0].get("finish_reason") or self.finish

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread

    def cut(self) -> None:
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def figures(self, fault_at: float, resumed_at: float) -> dict[str, Any]:
        """Tokens before the fault, in flight after it (until the fault was removed), after that."""
        hung = [t for t in self.times if fault_at < t < resumed_at]
        before = [t for t in self.times if t <= fault_at]
        last = (hung or before)[-1] if hung or before else None
        return {
            "tokens": len(self.times),
            "before_fault": len(before),
            "after_fault": len(hung),
            "after_resume": len([t for t in self.times if t >= resumed_at]),
            "first_token_s": round(self.times[0] - self.sent, 3) if self.times and self.sent else None,
            "last_token_vs_fault_s": None if last is None else round(last - fault_at, 3),
            "status": self.status,
            "finish": self.finish,
            "done": self.done,
            "error": self.error,
        }


class Poller:
    """Every `period_s`: the SERIES of /metrics, the engine core's CPU seconds and state, and
    (`health`) /health's status and milliseconds."""

    def __init__(self, base: str, core: int | None, period_s: float, health: bool = False) -> None:
        self.base, self.core, self.period_s, self.health = base, core, period_s, health
        self.polls: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        with requests.Session() as session:
            while not self.stop.is_set():
                started = time.time()
                self.polls.append(self._poll(session, started))
                self.stop.wait(max(0.0, self.period_s - (time.time() - started)))

    def _poll(self, session: requests.Session, at: float) -> dict[str, Any]:
        poll: dict[str, Any] = {"t": at, "values": {}}
        try:
            reply = session.get(self.base + "/metrics", timeout=2)
            poll["values"] = read_series(reply.text)
        except requests.RequestException as err:
            poll["error"] = type(err).__name__
        poll["ms"] = round((time.time() - at) * 1000, 1)
        if self.health:
            started = time.time()
            try:
                poll["health"] = session.get(self.base + "/health", timeout=2).status_code
            except requests.RequestException as err:
                poll["health"] = type(err).__name__
            poll["health_ms"] = round((time.time() - started) * 1000, 1)
        if self.core is not None:
            try:
                proc = psutil.Process(self.core)
                times = proc.cpu_times()
                poll["values"][CPU] = round(times.user + times.system, 3)
                poll["state"] = proc.status()
            except psutil.Error:
                poll["state"] = "gone"
        return poll


class Lab:
    """The launcher this run started, read only through its state files."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.state = Path(args.state)
        self.out = Path(args.out)
        self.profile_file = Path(args.profiles) / f"{args.profile}.toml"
        self.flag = Path(tomllib.loads(self.profile_file.read_text())["env"]["HANG_LP_FLAG"])
        self.base = f"http://127.0.0.1:{args.port}"
        self.launcher: subprocess.Popen[bytes] | None = None
        self.launcher_env: dict[str, str] = {}
        self.stopped: set[int] = set()  # pids this run SIGSTOPped
        self.results: dict[str, Any] = {"profile": args.profile, "modes": {}, "notes": []}

    def say(self, text: str) -> None:
        line = f"[i42] {text}"
        print(line, flush=True)
        with (self.out / "summary.txt").open("a") as f:
            f.write(line + "\n")

    def save(self) -> None:
        (self.out / "i42.json").write_text(json.dumps(self.results, indent=1, default=str))

    # ---- the launcher's files ----------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "profiles" / self.args.profile / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def history(self, since: float) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        rows = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                row = json.loads(line)
                if epoch(row["ts"]) >= since:
                    rows.append(row)
            except (ValueError, KeyError):
                continue  # a record torn mid-write
        return rows

    def first(self, events: tuple[str, ...], since: float, **match: Any) -> dict[str, Any] | None:
        return next(
            (
                r
                for r in self.history(since)
                if r.get("event") in events and all(r.get(k) == v for k, v in match.items())
            ),
            None,
        )

    def serving(self) -> bool:
        """Ours serves and its watch stands on no verdict (with `on_wedge = "log"` a wedged engine
        keeps serving, and a watch that stays wedged records no new verdict)."""
        status = self.status()
        ours = self.launcher is not None and status.get("launcher_pid") == self.launcher.pid
        watch = status.get("watch")
        verdict = watch.get("verdict") if isinstance(watch, dict) else None
        return ours and status.get("phase") in ("serving", "serving_last_good") and verdict not in FINAL

    def wait(self, what: str, check: Callable[[], Any], timeout_s: float) -> Any:
        """The first truthy value of `check` within the deadline (polled every 0.1 s); None after it."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            found = check()
            if found:
                return found
            if self.launcher is not None and self.launcher.poll() is not None:
                raise RuntimeError(f"launcher exited {self.launcher.returncode} while waiting for {what}")
            time.sleep(0.1)
        return None

    def core(self) -> int | None:
        """The engine core under the engine this launcher recorded (its process tree, never by name)."""
        pid = self.status().get("engine_pid")
        if not isinstance(pid, int):
            return None
        try:
            for child in psutil.Process(pid).children(recursive=True):
                if " ".join(child.cmdline()).startswith(CORE_TITLE):
                    return int(child.pid)
        except psutil.Error:
            return None
        return None

    # ---- life --------------------------------------------------------------------------------
    def ensure_serving(self, env: dict[str, str]) -> None:
        """A launcher of ours that serves, started with `env` added (a new one when it differs)."""
        ours = self.launcher is not None and self.launcher.poll() is None and env == self.launcher_env
        if ours and (self.serving() or self.wait("serving", self.serving, 60)):
            return  # else a new launcher: this one's engine is gone, or its watch stays on a verdict
        self.stop_launcher()
        cmd = [sys.executable, "-m", "launcher.cli", "--profiles-dir", self.args.profiles]
        cmd += ["--state-dir", str(self.state), "--profile", self.args.profile]
        log = (self.out / "launch.txt").open("ab")
        self.launcher = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
        self.launcher_env = dict(env)
        t0 = time.time()
        if not self.wait("serving", self.serving, SERVING_WAIT_S):
            raise RuntimeError(f"not serving within {SERVING_WAIT_S:g} s; status {self.status()}")
        added = f" with {env}" if env else ""
        self.say(f"launcher {self.launcher.pid} serving{added} after {time.time() - t0:.1f} s")

    def resume_stopped(self) -> list[int]:
        """SIGCONT to every process this run stopped that is still stopped."""
        resumed = []
        for pid in sorted(self.stopped):
            try:
                if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
                    os.kill(pid, signal.SIGCONT)
                    resumed.append(pid)
            except (psutil.Error, OSError):
                pass
        self.stopped.clear()
        return resumed

    def stop_launcher(self) -> None:
        """SIGTERM to our launcher (it stops its engine's group); after 120 s SIGKILL, and SIGKILL
        to the engine's own process group (its pid leads it: start_new_session)."""
        launcher, self.launcher = self.launcher, None
        if launcher is None or launcher.poll() is not None:
            return
        engine = self.status().get("engine_pid")
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(120)
            return
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait(30)
        if isinstance(engine, int) and engine > 1 and os.getpgid(engine) == engine:
            os.killpg(engine, signal.SIGKILL)
            self.say(f"launcher {launcher.pid} did not stop in 120 s: SIGKILL, and to engine group {engine}")

    def finish(self) -> None:
        self.flag.unlink(missing_ok=True)
        resumed = self.resume_stopped()
        if resumed:
            self.say(f"SIGCONT to {resumed}: still stopped at the end")
        self.stop_launcher()
        self.save()


# ---- faults ----------------------------------------------------------------------------------
def start_streams(lab: Lab, count: int, max_tokens: int) -> list[Stream]:
    body = {"model": lab.args.model, "prompt": "the weather in paris is", "max_tokens": max_tokens}
    body |= {"temperature": 0, "ignore_eos": True, "stream": True}
    streams = [Stream("127.0.0.1", lab.args.port, body) for _ in range(count)]
    for stream in streams:
        stream.start()
    flowing = lab.wait("streams", lambda: all(s.times for s in streams), 30)
    if not flowing:
        lab.say(f"streams not all flowing after 30 s: tokens {[len(s.times) for s in streams]}")
    time.sleep(0.5)  # mid-answer: a few decode steps past each first token
    return streams


def inject(lab: Lab, kind: str, core: int) -> float:
    if kind == "soft":
        lab.flag.parent.mkdir(parents=True, exist_ok=True)
        lab.flag.touch()
    else:
        os.kill(core, signal.SIGSTOP)
        lab.stopped.add(core)
    return time.time()


def remove(lab: Lab, kind: str, core: int, verdict: dict[str, Any] | None) -> float:
    """The flag goes at once; a stopped core gets SIGCONT unless the launcher is stopping it."""
    lab.flag.unlink(missing_ok=True)
    if kind == "stop" and (verdict is None or verdict.get("action") == "log"):
        lab.resume_stopped()
    return time.time()


def back_serving(lab: Lab, verdict: dict[str, Any] | None, since: float) -> dict[str, Any] | None:
    """After a restart (or rollback): `recovered`; after `log` or no verdict: the watch's `serving`."""
    if verdict is not None and verdict.get("action") in ("restart", "rollback"):
        found = lab.wait(
            "recovered", lambda: lab.first(("recovered", "serving_last_good"), since), SERVING_WAIT_S
        )
    else:
        after = epoch(verdict["ts"]) if verdict else since
        found = lab.wait(
            "serving",
            lambda: lab.first(("watch",), after, verdict="serving") if verdict else lab.serving(),
            120,
        )
    return found if isinstance(found, dict) else None


def incident_head(path: str | None) -> str:
    """The bundle up to vLLM's log tail (the verdict, the failed checks, the processes)."""
    if not path:
        return ""
    try:
        text = Path(path).read_text()
    except OSError as err:
        return f"(not readable: {err})"
    return text.split("\n== the last ", 1)[0]


def fault_run(lab: Lab, run: dict[str, Any]) -> None:
    """Fills `run` ({"kind", "load", "run"}) as it goes, so that a run cut short (an error, the SIGINT
    of the limit) still leaves what it measured; the fault is removed on every path."""
    kind = run["kind"]
    lab.ensure_serving(lab.args.soft_env if kind == "soft" else {})
    core = run["core_pid"] = lab.core()
    if core is None:
        raise RuntimeError(f"no {CORE_TITLE} under engine {lab.status().get('engine_pid')}")
    streams: list[Stream] = []
    with Poller(lab.base, core, 0.5, health=True) as poller:
        run["polls"] = poller.polls
        try:
            streams += start_streams(lab, 4, lab.args.stream_tokens) if run["load"] == "streams" else []
            fault_at = run["fault_at"] = inject(lab, kind, core)
            verdict = run["verdict"] = lab.wait("verdict", lambda: lab.first(FINAL, fault_at), VERDICT_WAIT_S)
            run["verdict_seen_s"] = round(time.time() - fault_at, 3)
            if verdict is not None:
                run["verdict_s"] = round(epoch(verdict["ts"]) - fault_at, 3)
        finally:
            resumed_at = remove(lab, kind, core, run.get("verdict"))
            for stream in streams:
                stream.cut()
            if "fault_at" in run:
                run["fault_removed_s"] = round(resumed_at - run["fault_at"], 3)
                run["streams"] = [s.figures(run["fault_at"], resumed_at) for s in streams]
    again = back_serving(lab, verdict, fault_at)
    run["sigcont_after"] = lab.resume_stopped()  # none after a restart: the launcher ended the stopped core
    run["serving_again_s"] = None if again is None else round(epoch(again["ts"]) - fault_at, 3)
    run["serving_again"] = again
    run["records"] = lab.history(fault_at)
    run["incident"] = incident_head((verdict or {}).get("incident"))
    hung = [p for p in poller.polls if p["t"] >= fault_at]
    run["core_states"] = sorted({str(p.get("state")) for p in hung})
    run["health_while_hung"] = sorted({str(p.get("health")) for p in hung})
    # from 1 s after the fault: a step already under way when it came may still report
    run["metrics_while_hung"] = moved(poller.polls, fault_at + 1.0, resumed_at)
    tell_run(lab, run)


def tell_run(lab: Lab, run: dict[str, Any]) -> None:
    name = f"{run['kind']} {run['load']} run {run['run']}"
    fault = "flag set" if run["kind"] == "soft" else f"SIGSTOP {CORE_TITLE} {run['core_pid']}"
    lasts = [s["last_token_vs_fault_s"] for s in run["streams"]]
    if lasts:
        tokens = [s["tokens"] for s in run["streams"]]
        lab.say(f"{name}: {fault}; the streams' last tokens at {lasts} s from it ({tokens} tokens)")
    verdict = run["verdict"]
    if verdict is None:
        lab.say(f"{name}: NO verdict within {VERDICT_WAIT_S:g} s; engine core states {run['core_states']}")
        return
    lab.say(
        f"{name}: {verdict['event']} after {run['verdict_s']} s by {verdict.get('check')}: "
        f"{verdict.get('detail')}; figures {verdict.get('figures')}; process {verdict.get('process')}; "
        f"action {verdict.get('action')}; engine core states {run['core_states']}, /health "
        f"{run['health_while_hung']}; moving while hung: {moving(run['metrics_while_hung'])}"
    )
    until = epoch(verdict["ts"])
    watch = [
        (r.get("verdict"), r.get("check"), round(epoch(r["ts"]) - run["fault_at"], 3))
        for r in run["records"]
        if r.get("event") == "watch" and epoch(r["ts"]) <= until
    ]
    lab.say(
        f"{name}: watch records before it (verdict, check, s) {watch}; fault removed "
        f"{run['fault_removed_s']} s after the fault; serving again after {run['serving_again_s']} s"
    )


def fault_mode(lab: Lab, kind: str) -> dict[str, Any]:
    if kind == "soft" and lab.args.soft_env:
        lab.say(f"soft: rehearsal, {lab.args.soft_env} stands in for the flag (its engine hangs by itself)")
    runs: list[dict[str, Any]] = []
    result: dict[str, Any] = {"runs": runs}
    lab.results["modes"][kind] = result
    for load in ("idle", "streams"):
        for index in range(1, lab.args.runs + 1):
            runs.append({"kind": kind, "load": load, "run": index, "verdict": None, "verdict_s": None})
            try:
                fault_run(lab, runs[-1])
            finally:
                lab.save()
        took = spread(r["verdict_s"] for r in runs if r["load"] == load)
        missed = sum(r["verdict"] is None for r in runs if r["load"] == load)
        result[f"{load}_verdict_s"] = took
        lab.say(f"{kind} {load}: fault -> verdict {took} s; {missed} without a verdict")
    return result


# ---- queueing ---------------------------------------------------------------------------------
class Client:
    """Streams one request after another until told to stop; `cut()` ends the one in flight."""

    def __init__(self, lab: Lab, max_tokens: int) -> None:
        self.lab, self.max_tokens = lab, max_tokens
        self.done: list[Stream] = []
        self.current: Stream | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = {"model": self.lab.args.model, "prompt": "the weather in paris is", "stream": True}
        body |= {"max_tokens": self.max_tokens, "temperature": 0, "ignore_eos": True}
        while not self.stop.is_set():
            self.current = Stream("127.0.0.1", self.lab.args.port, body)
            self.current.run()
            self.done.append(self.current)

    def cut(self) -> None:
        self.stop.set()
        if self.current is not None:
            self.current.cut()


def queue_mode(lab: Lab) -> dict[str, Any]:
    lab.ensure_serving({})
    window_s, short = lab.args.queue_s, lab.args.queue_short
    clients = [Client(lab, 4) for _ in range(short)]
    clients += [Client(lab, lab.args.queue_tokens) for _ in range(lab.args.queue_clients - short)]
    t0 = time.time()
    with Poller(lab.base, lab.core(), 1.0) as poller:
        for client in clients:
            client.thread.start()
        time.sleep(window_s)
        for client in clients:
            client.cut()
        for client in clients:
            client.thread.join(30)
        time.sleep(lab.args.queue_grace_s)  # a canary queued in the window is judged after it
    rows = lab.history(t0)
    waits = [s.times[0] - s.sent for c in clients[:short] for s in c.done if s.times and s.sent]
    waiting = [p["values"].get("vllm:num_requests_waiting") for p in poller.polls]
    result = {
        "window_s": window_s,
        "clients": len(clients),
        "short_clients": short,
        "short_requests": sum(len(c.done) for c in clients[:short]),
        "long_requests": sum(len(c.done) for c in clients[short:]),
        "failed": sum(s.status != 200 for c in clients for s in c.done),
        "cut_at_end": sum(s.status == 200 and not s.done for c in clients for s in c.done),
        "short_unserved_at_end": sum(not s.times for c in clients[:short] for s in c.done),
        "short_wait_s": spread(waits),
        "short_waits_s": [round(w, 3) for w in waits],
        "waiting": spread(waiting),
        "records": rows,
        "verdicts": [r for r in rows if r.get("event") in FINAL],
        "polls": poller.polls,
    }
    lab.results["modes"]["queue"] = result
    watch = [(r.get("verdict"), r.get("check"), r.get("detail")) for r in rows if r.get("event") == "watch"]
    r = result
    lab.say(
        f"queue: {len(clients)} clients for {window_s:g} s on max_num_seqs 4: {r['short_requests']} short, "
        f"{r['long_requests']} long requests, {r['failed']} failed, {r['cut_at_end']} cut at the end "
        f"({r['short_unserved_at_end']} short ones still queued); short waits {r['short_wait_s']} s; "
        f"num_requests_waiting {r['waiting']}"
    )
    verdicts = [(v["event"], v.get("detail")) for v in r["verdicts"]]
    lab.say(f"queue: verdicts {verdicts}; watch records {watch}")
    return result


# ---- the long prefill ---------------------------------------------------------------------------
def max_model_len(lab: Lab) -> int:
    try:
        models = requests.get(lab.base + "/v1/models", timeout=5).json()["data"]
        return int(models[0]["max_model_len"])
    except (requests.RequestException, ValueError, KeyError, IndexError, TypeError):
        return 2048


def idle(lab: Lab) -> bool:
    try:
        seen = read_series(requests.get(lab.base + "/metrics", timeout=5).text)
    except requests.RequestException:
        return False
    return seen.get("vllm:num_requests_running") == 0.0 and seen.get("vllm:num_requests_waiting") == 0.0


def prefill_run(lab: Lab, index: int, length: int) -> dict[str, Any]:
    if not lab.wait("idle", lambda: idle(lab), 30):
        lab.say(f"prefill run {index}: the engine was not idle after 30 s; measured anyway")
    rng = random.Random(time.time_ns())  # token ids of the tiny vocabulary (467), new each run: no cache hit
    prompt = [rng.randrange(3, 400) for _ in range(length)]
    body = {"model": lab.args.model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": True}
    stream = Stream("127.0.0.1", lab.args.port, body)
    with Poller(lab.base, lab.core(), lab.args.prefill_poll_s) as poller:
        time.sleep(1.0)  # polls of the idle engine first
        stream.start().join(120)
        time.sleep(1.0)
    sent = stream.sent or time.time()
    first = stream.times[0] if stream.times else time.time()
    during = moved(poller.polls, sent, first)
    window = [p["values"] for p in poller.polls if sent <= p["t"] < first]
    # a request beside the prompt (the watch's canary, every canary_interval_s) moves the counters too
    beside = max(
        (v.get("vllm:num_requests_running", 0) + v.get("vllm:num_requests_waiting", 0) for v in window),
        default=0,
    )
    run = {
        "run": index,
        "prompt_tokens": length,
        "first_token_s": round(first - sent, 3),
        "error": stream.error,
        "polls_in_prefill": sum(sent <= p["t"] < first for p in poller.polls),
        "poll_ms": spread(p.get("ms") for p in poller.polls),
        "idle_before": moved(poller.polls, poller.polls[0]["t"] if poller.polls else sent, sent),
        "during_prefill": during,
        "moved": moving(during),
        "another_request": beside > 1,
        "polls": poller.polls,
    }
    lab.say(
        f"prefill run {index}: {length} prompt tokens, first token after {run['first_token_s']} s, "
        f"{run['polls_in_prefill']} polls in it (each {run['poll_ms']['median']} ms); moved: {run['moved']}; "
        f"still: {[n for n in (*SERIES, CPU) if n not in run['moved']]}; error {stream.error}"
        + (
            "; ANOTHER REQUEST ran beside it (a canary?): its counters are not the prefill's"
            if beside > 1
            else ""
        )
    )
    for name, seen in during.items():
        lab.say(f"prefill run {index}: {name}: {seen}")
    return run


def prefill_mode(lab: Lab) -> dict[str, Any]:
    lab.ensure_serving({})
    length = max_model_len(lab) - 8
    runs = [prefill_run(lab, i + 1, length) for i in range(lab.args.prefill_runs)]
    result = {"runs": runs}
    lab.results["modes"]["prefill"] = result
    return result


def run_mode(lab: Lab, mode: str) -> None:
    """One mode; a failure ends the mode, not the run (the next mode starts a launcher if need be)."""
    t0 = time.time()
    lab.say(f"{mode}: starting")
    try:
        if mode in ("soft", "stop"):
            fault_mode(lab, mode)
        elif mode == "queue":
            queue_mode(lab)
        else:
            prefill_mode(lab)
    except Exception as err:
        lab.say(f"{mode}: stopped early: {type(err).__name__}: {err}"[:400])
        lab.results["notes"].append(f"{mode}: {type(err).__name__}: {err}")
        lab.flag.unlink(missing_ok=True)
        lab.resume_stopped()
    lab.say(f"{mode}: done in {time.time() - t0:.0f} s")
    lab.save()


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise SystemExit(f"--soft-env {pair!r}: NAME=VALUE expected")
        env[name] = value
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("profiles", "state", "out"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--profile", default="tiny-hang")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--port", type=int, default=8019, help="tiny-hang's engine.port")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stream-tokens", type=int, default=4000)
    ap.add_argument("--queue-s", type=float, default=60.0)
    ap.add_argument("--queue-grace-s", type=float, default=20.0)
    ap.add_argument("--queue-clients", type=int, default=32)
    ap.add_argument("--queue-short", type=int, default=8)
    ap.add_argument("--queue-tokens", type=int, default=1024)
    ap.add_argument("--prefill-runs", type=int, default=2)
    ap.add_argument("--prefill-poll-s", type=float, default=0.05)
    ap.add_argument("--soft-env", action="append", default=[], help="NAME=VALUE for the soft mode's launcher")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= set(MODES):
        raise SystemExit(f"--modes {args.modes!r}: a comma-separated list of {', '.join(MODES)}")
    args.soft_env = parse_env(args.soft_env)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    lab = Lab(args)
    lab.flag.unlink(missing_ok=True)  # a flag left by an earlier run would hang the first engine
    try:
        for mode in modes:
            run_mode(lab, mode)
    except BaseException as err:  # the SIGINT of check-i42.sh's limit: what was measured still goes out
        lab.say(f"stopped early: {type(err).__name__}: {err}"[:400])
    finally:
        lab.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
