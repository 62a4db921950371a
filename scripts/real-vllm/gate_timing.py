"""Gate overhead on the real vLLM (check-i21.sh): one `launch --profile P` start, timed from the
engine's first /health 200 to the chain's verdict, then the tool-call cases sent by hand.

Prints one line per finding (check-i21.sh copies them into summary.txt) and writes
`gate-timing.json` into the work dir:
- ready → verdict: the first /health 200 (polled every 10 ms) to the `gates` history record;
  ready → promoted too when the chain passed;
- each gate's own duration_s, and the chain without tool_call (ready → verdict − tool_call's);
- every tool-call case alone, one after another (what the gate cost before issue 21), and all of them
  at once (what it costs now), against the same engine after the verdict, `--repeats` times.

Run by check-i21.sh (its PYTHONPATH and profiles); alone: `gate_timing.py WORK PROFILE PORT`.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from gates.tool_cases import CASES, ToolCase


def ts(record: dict[str, Any]) -> float:
    return datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def history(state: Path) -> list[dict[str, Any]]:
    path = state / "history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def first_health(url: str, launcher: subprocess.Popen[bytes], deadline_s: float) -> float | None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and launcher.poll() is None:
        try:
            if requests.get(url + "/health", timeout=1).status_code == 200:
                return time.time()
        except requests.RequestException:
            pass
        time.sleep(0.01)
    return None


def wait_record(
    state: Path, event: str, launcher: subprocess.Popen[bytes], deadline_s: float
) -> dict[str, Any] | None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = [r for r in history(state) if r.get("event") == event]
        if found:
            return found[-1]
        if launcher.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def one_case(url: str, case: ToolCase, model: str) -> float:
    started = time.perf_counter()
    body = case.request(model, 1024)
    with requests.post(url + "/v1/chat/completions", json=body, timeout=120, stream=case.stream) as reply:
        for _ in reply.iter_content(chunk_size=None):
            pass
    return time.perf_counter() - started


def round_trips(url: str, repeats: int) -> dict[str, Any]:
    model = requests.get(url + "/v1/models", timeout=10).json()["data"][0]["id"]
    sequential, together = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        each = {case.name: one_case(url, case, model) for case in CASES}
        sequential.append((time.perf_counter() - started, each))
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
            list(pool.map(lambda case: one_case(url, case, model), CASES))
        together.append(time.perf_counter() - started)
    return {"sequential_s": [s for s, _ in sequential], "each_case_s": [e for _, e in sequential],
            "concurrent_s": together}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("profile")
    parser.add_argument("port", type=int)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--deadline-s", type=float, default=420)
    options = parser.parse_args()
    work, state, url = options.work, options.work / "state", f"http://127.0.0.1:{options.port}"
    argv = [sys.executable, "-m", "launcher.cli", "--profiles-dir", str(work / "profiles"), "--state-dir",
            str(state), "--profile", options.profile]  # fmt: skip
    with (work / f"launch-{options.profile}.txt").open("wb") as sink:
        launcher = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    result: dict[str, Any] = {"profile": options.profile}
    try:
        ready = first_health(url, launcher, options.deadline_s)
        gates = wait_record(state, "gates", launcher, options.deadline_s) if ready else None
        if ready is None or gates is None:
            missing = "verdict" if ready else "/health 200"
            print(f"{options.profile}: no {missing}; launch exit {launcher.poll()}")
            return 1
        verdict = ts(gates)
        durations = {g["name"]: g["duration_s"] for g in gates["gates"]}
        result.update(ready_to_verdict_s=verdict - ready, passed=gates["passed"], gate_durations_s=durations,
                      verdicts={g["name"]: g["verdict"] for g in gates["gates"]})  # fmt: skip
        print(f"{options.profile}: first /health 200 → chain verdict {verdict - ready:.3f} s "
              f"(passed: {gates['passed']})")  # fmt: skip
        for gate in gates["gates"]:
            summary = gate["summary"][:160]
            print(f"  {gate['name']}: {gate['verdict']} in {gate['duration_s']:.3f} s: {summary}")
        if "tool_call" in durations:
            without = verdict - ready - durations["tool_call"]
            result["ready_to_verdict_without_tool_call_s"] = without
            print(f"  without tool_call: {without:.3f} s")
        promoted = wait_record(state, "promoted", launcher, 10) if gates["passed"] else None
        if promoted is not None:
            result["ready_to_promoted_s"] = ts(promoted) - ready
            print(f"  first /health 200 → promoted {ts(promoted) - ready:.3f} s")
            trips = round_trips(url, options.repeats)
            result["round_trips"] = trips
            print(f"  the five cases one after another: {fmt(trips['sequential_s'])}; all at once: "
                  f"{fmt(trips['concurrent_s'])}")  # fmt: skip
            slowest = {name: max(e[name] for e in trips["each_case_s"]) for name in trips["each_case_s"][0]}
            print("  each case alone (slowest of the repeats): "
                  + ", ".join(f"{k} {v:.3f} s" for k, v in slowest.items()))  # fmt: skip
        return 0
    finally:
        (work / "gate-timing.json").write_text(json.dumps(result, indent=1))
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(timeout=90)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()


def fmt(values: list[float]) -> str:
    return f"min {min(values):.3f} / median {statistics.median(values):.3f} / max {max(values):.3f} s"


if __name__ == "__main__":
    sys.exit(main())
