"""Run the real `launch` as a process against `vllm-sim` profiles, for integration tests.

Waits are on state the launcher writes (status.json, history.jsonl) with deadlines; cleanup kills
the launcher's and the engine's process groups and reports anything left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from launcher.procgroup import group_members
from tests.simserver import HANG_S
from tests.simserver import free_port as free_port  # one free-port helper for every test module

LAUNCH = Path(sys.executable).with_name("launch")

GOOD_ARGS: dict[str, Any] = {
    "max_num_seqs": 4,
    "max_model_len": 2048,
    "gpu_memory_utilization": 0.3,
    "enable_auto_tool_choice": True,
    "tool_call_parser": "hermes",
    "compilation_config": {"cudagraph_capture_sizes": [1, 2, 4]},
    "sim_speed": 50,
    "sim_startup_speed": 1000,  # the real tiny model's ~58 s startup in 0.06 s
}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def write_profile(
    directory: Path, name: str, port: int, args: dict[str, Any] | None = None,
    gates: dict[str, dict[str, Any]] | None = None, order: list[str] | None = None,
    supervisor: dict[str, Any] | None = None,
) -> Path:  # fmt: skip
    lines = ["[engine]", 'command = ["vllm-sim", "serve"]', 'model = "test/sim-1b"', 'served_model_name = "sim"',
             f"port = {port}", "", "[args]"]  # fmt: skip
    lines += [f"{k} = {toml_value(v)}" for k, v in {**GOOD_ARGS, **(args or {})}.items()]
    if order is not None:
        lines += ["", "[gates]", f"order = {toml_value(order)}"]
    tables = {"tool_call": {"cases": ["auto", "required"]}, **(gates or {})}
    for gate, table in tables.items():
        lines += ["", f"[gates.{gate}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    if supervisor:
        lines += ["", "[supervisor]"] + [f"{k} = {toml_value(v)}" for k, v in supervisor.items()]
    path = directory / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Launcher:
    profiles: Path
    state: Path
    profile: str
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to the launcher's environment
    out: Path = field(init=False)

    def __post_init__(self) -> None:
        self.out = self.state.parent / f"launch-{self.profile}.out"

    def start(self, *extra: str, journal: bool = False) -> Launcher:
        """`journal`: its output file plays systemd's journal stream (JOURNAL_STREAM names it)."""
        self.state.mkdir(parents=True, exist_ok=True)
        argv = [str(LAUNCH), "--profiles-dir", str(self.profiles), "--state-dir", str(self.state),
                "--profile", self.profile, *extra]  # fmt: skip
        with self.out.open("wb") as sink:
            env = {**os.environ, **self.env}
            if journal:
                stat = os.fstat(sink.fileno())
                env["JOURNAL_STREAM"] = f"{stat.st_dev}:{stat.st_ino}"
            self.proc = subprocess.Popen(
                argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, env=env
            )
        return self

    @property
    def status_path(self) -> Path:
        return self.state / "profiles" / self.profile / "status.json"

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.status_path.read_text()))
        except (OSError, ValueError):
            return {}

    def history(self) -> list[dict[str, Any]]:
        path = self.state / "history.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait_for(self, check: Callable[[dict[str, Any]], bool], timeout_s: float = HANG_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = self.status()
            if status and check(status):
                return status
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"launcher exited {self.proc.returncode} first:\n{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"no such status within {timeout_s}s; last {self.status()}\n{self.output()}")

    def wait_phase(self, phase: str, timeout_s: float = HANG_S) -> dict[str, Any]:
        return self.wait_for(lambda s: s.get("phase") == phase, timeout_s)

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait_exit(self, timeout_s: float = HANG_S) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout_s)

    def output(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def engine_pids(self) -> list[int]:
        """Every engine process this launcher started, from the history."""
        return [
            int(r["engine_pid"]) for r in self.history() if r.get("event") == "start" and r.get("engine_pid")
        ]

    def cleanup(self) -> list[str]:
        """Kill whatever is left (launcher group, engine groups); report what had to be killed."""
        left: list[str] = []
        launcher_alive = self.proc is not None and self.proc.poll() is None
        # Engines first: killing the launcher first would leave them, for a moment, orphans that
        # another launcher's preflight would rightly refuse to start beside.
        for pid in self.engine_pids():
            if launcher_alive:
                _kill_group(pid)
                continue
            left += [f"engine group {pid}: {p}" for p in group_members(pid)]
            _kill_group(pid)
        if launcher_alive:
            assert self.proc is not None
            left.append(f"launcher {self.proc.pid}")
            _kill_group(self.proc.pid)
            self.proc.wait(timeout=10)
        return left


class LauncherFactory(Protocol):
    """The `launcher_factory` fixture: a Launcher on the test's scratch profiles and state dirs."""

    def __call__(self, profile: str = "svc") -> Launcher: ...


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def append_table(path: Path, table: str, values: dict[str, Any]) -> None:
    """Add a `[table]` with these values to a profile written by `write_profile`."""
    lines = ["", f"[{table}]"] + [f"{k} = {toml_value(v)}" for k, v in values.items()]
    path.write_text(path.read_text() + "\n".join(lines) + "\n")
