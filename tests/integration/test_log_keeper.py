"""vLLM's output survives the launcher's death: a SIGKILLed launcher's engine still gets its
shutdown lines into `engine.log` through the log keeper, every line of them, the key masked, and
the keeper ends by itself once the engine is gone."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from launcher.procgroup import group_members
from launcher.supervisor.logkeeper import MODULE
from tests.launcher_run import Launcher, free_port, write_profile
from tests.simserver import wait_gone

pytestmark = pytest.mark.integration
KEY = "sk-live-4f9a8b7c6d5e"

# An engine that floods numbered lines until SIGTERM (the launcher's death signal), then prints a
# shutdown like vLLM's, with the key in it, and the number of lines it wrote in all.
FLOOD_UNTIL_TERM = (
    "import os, signal, sys, time\n"
    "key = os.environ['VLLM_API_KEY']\n"
    "stop = []\n"
    "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))\n"
    "lines = 0\n"
    "def emit(text):\n"
    "    global lines\n"
    "    sys.stdout.write(text + '\\n')\n"
    "    lines += 1\n"
    "emit(\"(APIServer pid=1) INFO non-default args: {'api_key': ['\" + key + \"']}\")\n"
    "while not stop:\n"
    "    for _ in range(200):\n"
    "        emit(f'INFO line {lines}')\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(0.01)\n"
    "for step in range(20):\n"
    "    emit(f'[shutdown] step {step}: --api-key {key}')\n"
    "emit(f'[shutdown] complete: {lines + 1} lines written')\n"
    "sys.stdout.flush()\n"
)

# A stand-in launcher: starts the engine through EngineProcess (with its log keeper) from its main
# thread, says the pids, then waits to be killed.
LAUNCHER = (
    "import sys, threading\n"
    "from pathlib import Path\n"
    "from launcher.supervisor.engine import EngineProcess\n"
    "env = {'PATH': '/usr/bin:/bin', 'VLLM_API_KEY': sys.argv[3]}\n"
    "engine = EngineProcess([sys.executable, '-c', sys.argv[1]], env, lambda *_: None, Path(sys.argv[2]))\n"
    "engine.start()\n"
    "print(engine.pid, engine.keeper_pid, flush=True)\n"
    "threading.Event().wait()\n"
)


def _wait_for(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)
    assert check(), f"{what} within {timeout_s}s"  # type: ignore[operator]


def _kill(procs: list[psutil.Process]) -> None:
    for proc in procs:  # only processes this test started (directly or through its launcher)
        with contextlib.suppress(psutil.Error):
            proc.kill()


def test_nothing_is_lost_and_the_key_stays_masked_when_the_launcher_is_sigkilled(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "engine.log"
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, FLOOD_UNTIL_TERM, str(log), KEY],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    procs: list[psutil.Process] = []
    try:
        assert launcher.stdout is not None
        engine_pid, keeper_pid = map(int, launcher.stdout.readline().split())
        procs = [psutil.Process(keeper_pid), *(psutil.Process(pid) for pid in group_members(engine_pid))]
        _wait_for(lambda: log.exists() and log.stat().st_size > 300_000, 30, "no flood in engine.log")
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=10)
        assert wait_gone(procs, timeout_s=30) == [], "the engine or the log keeper outlived the launcher"
    finally:
        _kill(procs)
        launcher.kill()
        launcher.wait(timeout=10)
    text = log.read_text()
    lines = text.splitlines()
    written = int(lines[-1].split()[2])  # `[shutdown] complete: N lines written`
    print(f"lines written by the engine: {written}, lines in engine.log: {len(lines)}")
    assert len(lines) == written, "lines were lost (or doubled) on the way to engine.log"
    assert lines[1 : written - 21] == [f"INFO line {n}" for n in range(1, written - 21)]
    assert lines[written - 21 : written - 1] == [f"[shutdown] step {s}: --api-key ***" for s in range(20)]
    assert lines[0].endswith("non-default args: {'api_key': '***'}")
    assert KEY not in text and "sk-live" not in text


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    (tmp_path / "profiles").mkdir()
    made = Launcher(tmp_path / "profiles", tmp_path / "state", "svc")
    yield made
    assert made.cleanup() == [], "processes were left behind"


def test_a_sigkilled_launchers_engine_logs_its_shutdown_to_engine_log(launcher: Launcher) -> None:
    """vLLM gets SIGTERM when its launcher dies (engine.py `die_with_this_process`) and logs its
    shutdown; the log keeper, not the dead launcher, writes those lines and then ends."""
    write_profile(launcher.profiles, "svc", free_port())
    launcher.start()
    status = launcher.wait_phase("serving")
    assert launcher.proc is not None
    keepers = [p for p in psutil.Process(launcher.proc.pid).children() if MODULE in " ".join(p.cmdline())]
    assert len(keepers) == 1, "the engine's output does not go through a log keeper"
    engine = [psutil.Process(pid) for pid in group_members(status["engine_pid"])]
    try:
        launcher.signal(signal.SIGKILL)
        launcher.wait_exit()
        assert wait_gone(engine + keepers, timeout_s=30) == [], (
            "the engine or its keeper outlived the launcher"
        )
    finally:
        _kill(engine + keepers)
    text = (launcher.state / "profiles" / "svc" / "logs" / "engine.log").read_text()
    assert "[shutdown] API server: shutdown triggered" in text
    assert text.endswith(f"INFO:     Finished server process [{status['engine_pid']}]\n"), text[-500:]
