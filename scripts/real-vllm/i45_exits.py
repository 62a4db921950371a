#!/usr/bin/env python3
"""Issue 45 on the GPU machine, the ways out: a launcher SIGKILLed during a trial beside production
leaves the GPU's power limit lowered, and the next start puts it back from its record; then a change
whose memory the GPU cannot hold beside production falls back to a stop, with NVML's figures in the
reason. Run by check-i45.sh exits after `device.sh install` and `device.sh frontdoor`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from launcher.host.gpu_sim import gpu_probe

PROFILE = "tiny-beside"
MARKER = 'patterns = ["Using FLASH_ATTN attention backend"]'


def limit_w() -> float | None:
    with gpu_probe() as probe:
        if probe.skip_reason() is not None:
            return None
        found = probe.power_limit(0)
        return None if found is None else found.current_w


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.state, self.out = Path(args.state), Path(args.out)
        self.profile = Path(args.profiles) / f"{PROFILE}.toml"
        self.base = [
            sys.executable,
            "-m",
            "launcher.cli",
            "--profiles-dir",
            args.profiles,
            "--state-dir",
            args.state,
        ]
        self.results: dict[str, Any] = {}

    def say(self, text: str) -> None:
        line = f"[i45 exits] {text}"
        print(line, flush=True)
        with (self.out / "summary.txt").open("a") as f:
            f.write(line + "\n")

    def history(self) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    def start(self, name: str) -> subprocess.Popen[bytes]:
        log = (self.out / f"{name}.txt").open("wb")
        proc = subprocess.Popen([*self.base, "--profile", PROFILE], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                status = json.loads((self.state / "profiles" / PROFILE / "status.json").read_text())
            except (OSError, ValueError):
                status = {}
            if status.get("launcher_pid") == proc.pid and status.get("phase") in (
                "serving",
                "serving_last_good",
            ):
                return proc
            if proc.poll() is not None:
                raise RuntimeError(f"{name}: launcher exited {proc.returncode}")
            time.sleep(0.2)
        raise RuntimeError(f"{name}: not serving within 300 s")

    def killed_during_trial(self) -> None:
        launcher = self.start("launcher-1")
        self.results["limit_serving_w"] = limit_w()
        served = self.profile.read_text()
        long_trial = re.sub(r"(?m)^order = .*$", 'order = ["kernel_marker", "health"]', served)
        self.profile.write_text(
            long_trial.replace(MARKER, 'patterns = ["I45_NEVER_PRINTED"]').replace(
                "after_ready_s = 5", "after_ready_s = 120"
            )
        )  # a trial that lasts
        t0 = time.time()
        os.kill(launcher.pid, signal.SIGHUP)
        while time.time() - t0 < 240 and not (
            "beside" in [r["event"] for r in self.history()] and limit_w() == 400
        ):
            time.sleep(0.5)
        time.sleep(5)  # the candidate loading beside production
        during = limit_w()
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(30)
        engines = [
            int(r["engine_pid"]) for r in self.history() if r["event"] == "start" and r.get("engine_pid")
        ]
        for pid in engines:  # the engines it left: their groups (this run started them)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        time.sleep(5)
        after_kill = limit_w()
        record = self.state / "profiles" / PROFILE / "power_caps.json"
        kept = record.read_text() if record.exists() else None
        self.profile.write_text(served)
        again = self.start("launcher-2")
        restored = [r for r in self.history() if r["event"] == "power_restored"]
        self.results["killed"] = {
            "during_w": during,
            "after_kill_w": after_kill,
            "record": kept,
            "after_restart_w": limit_w(),
            "power_restored": restored[-1] if restored else None,
        }
        self.say(
            f"SIGKILL during the trial: {self.results['limit_serving_w']} W serving, {during} W during, "
            f"{after_kill} W after the kill (record kept: {kept is not None}), "
            f"{self.results['killed']['after_restart_w']} W after the next start; "
            f"power_restored {restored[-1] if restored else None}"
        )
        self.no_room(again)

    def no_room(self, launcher: subprocess.Popen[bytes]) -> None:
        t0 = time.time()
        done = subprocess.run(
            [
                *self.base,
                "set",
                "--profile",
                PROFILE,
                "gpu_memory_utilization=0.75",
                "--tag",
                "big",
                "--apply",
                "--timeout-s",
                "400",
            ],
            capture_output=True,
            text=True,
            timeout=450,
        )
        rows = [
            r
            for r in self.history()
            if r["event"] in ("beside_skipped", "beside", "promoted", "rejected", "drained", "engine_stopped")
        ]
        skipped = [r for r in rows if r["event"] == "beside_skipped"]
        self.results["no_room"] = {
            "exit": done.returncode,
            "seconds": round(time.time() - t0, 1),
            "skipped": skipped[-1] if skipped else None,
            "verdict": done.stdout[-400:],
        }
        reason = skipped[-1]["reason"] if skipped else None
        self.say(
            f"0.75 beside 0.3: exit {done.returncode} in {time.time() - t0:.1f} s; beside_skipped: {reason}; "
            f"instead {skipped[-1].get('instead') if skipped else None}"
        )
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(120)
        self.results["limit_end_w"] = limit_w()
        self.say(f"after the run: limit {self.results['limit_end_w']} W")


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--profiles", "--state", "--out"):
        parser.add_argument(name, required=True)
    run = Run(parser.parse_args())
    try:
        run.killed_during_trial()
    except Exception as err:  # the evidence so far still comes back
        run.say(f"stopped: {type(err).__name__}: {err}")
    (run.out / "i45-exits.json").write_text(json.dumps(run.results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
