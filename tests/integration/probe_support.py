"""A production box for `launch probe` tests: a real launcher serving a `vllm-sim` profile.

Every process of a box (the launcher, its engine, the probe, its arms, a restarted launcher)
carries the box's `VLLM_GATE_STATE` in its environment, so the end of a test can prove that nothing
it started is still running — and end whatever is, reporting it as a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from launcher.procgroup import group_members
from tests.launcher_run import LAUNCH, Launcher, free_port, write_profile
from tests.simserver import HANG_S

PROFILE = "prod"
# At --sim-speed 50 with --sim-decode-ms 100: 2 ms decode steps; startup phases well under a second.
SIM_ARGS: dict[str, Any] = {"sim_speed": 50, "sim_startup_speed": 1000, "sim_decode_ms": 100}
TINY_BENCH = ["--concurrency", "1", "--rounds", "2", "--prompts", "2", "--max-tokens", "24", "--warmup", "1"]


@dataclass
class Box:
    root: Path

    @property
    def profiles(self) -> Path:
        return self.root / "profiles"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "VLLM_GATE_STATE": str(self.state), "VLLM_GATE_PROFILES": str(self.profiles)}

    @property
    def journal_path(self) -> Path:
        return self.state / "probe" / "journal.json"

    def write_prod(self, supervisor: dict[str, Any] | None = None, **args: Any) -> Path:
        self.profiles.mkdir(parents=True, exist_ok=True)
        return write_profile(
            self.profiles, PROFILE, free_port(), args={**SIM_ARGS, **args}, supervisor=supervisor
        )

    def start_production(self) -> Launcher:
        launcher = Launcher(self.profiles, self.state, PROFILE)
        previous = os.environ.get("VLLM_GATE_STATE")
        os.environ["VLLM_GATE_STATE"] = str(self.state)  # inherited by the launcher: see ours()
        try:
            launcher.start()
        finally:
            if previous is None:
                del os.environ["VLLM_GATE_STATE"]
            else:
                os.environ["VLLM_GATE_STATE"] = previous
        launcher.wait_phase("serving")
        return launcher

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state / "profiles" / PROFILE / "status.json").read_text()))
        except (OSError, ValueError):
            return {}

    def launcher_pid(self) -> int | None:
        try:
            return int(json.loads((self.state / "profiles" / PROFILE / "launcher.json").read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None

    def journal(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.journal_path.read_text()))
        except (OSError, ValueError):
            return None

    def history(self) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        return (
            [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            if path.exists()
            else []
        )

    def launch(self, *args: str, timeout_s: float = HANG_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LAUNCH), *args], capture_output=True, text=True, env=self.env, timeout=timeout_s
        )

    def start_probe(self, *args: str, out: Path) -> subprocess.Popen[str]:
        argv = [str(LAUNCH), "probe", "--profile", PROFILE, *args, "--out", str(out), "--no-plots"]
        return subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=True,
        )

    def wait(self, check: Callable[[], bool], what: str, timeout_s: float = HANG_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise AssertionError(
            f"not within {timeout_s}s: {what}; status {self.status()}; journal {self.journal()}"
        )

    def wait_serving(self, not_pid: int | None = None, timeout_s: float = HANG_S) -> dict[str, Any]:
        def serving() -> bool:
            status, pid = self.status(), self.launcher_pid()
            return status.get("phase") == "serving" and pid is not None and pid != not_pid and alive(pid)

        self.wait(serving, "production serving again", timeout_s)
        return self.status()

    def wait_arm_running(self, timeout_s: float = HANG_S) -> dict[str, Any]:
        """The journal names a started arm engine (its process group)."""
        self.wait(
            lambda: bool((self.journal() or {}).get("arm_pgid")), "an arm engine in the journal", timeout_s
        )
        journal = self.journal()
        assert journal is not None
        return journal

    def ours(self) -> list[psutil.Process]:
        """Live processes started for this box (they carry its VLLM_GATE_STATE), this test excepted."""
        found = []
        me = os.getpid()
        for proc in psutil.process_iter(["status"]):
            try:
                if proc.pid == me or proc.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if proc.environ().get("VLLM_GATE_STATE") == str(self.state):
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def production_pids(self) -> set[int]:
        pid = self.launcher_pid()
        if pid is None or not alive(pid):
            return set()
        try:
            return {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
        except psutil.Error:
            return {pid}

    def leftovers(self) -> list[str]:
        """Name every process of this box that is not the serving production; then end them all."""
        production = self.production_pids()
        everything = self.ours()
        named = []
        for proc in everything:
            try:
                if proc.pid not in production:
                    named.append(f"{proc.pid} {' '.join(proc.cmdline())[:100]}")
                proc.kill()
            except psutil.Error:
                continue
        deadline = time.monotonic() + 5
        while any(alive(p.pid) for p in everything) and time.monotonic() < deadline:
            time.sleep(0.02)
        return named


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def group_alive(pgid: int) -> list[int]:
    return group_members(pgid)
