"""`.ci/burner.py`, the CPU-bound neighbours `.ci/run` proves the suite beside (issue 34, point 2):
started and ended by pid, bounded by a lifetime and by the process they watch, and a verdict that
fails when a burner was signalled or ran out before the suite did. Each burner here spins for a
moment only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.conftest import REPO
from tests.simserver import HANG_S, wait_gone

BURNER = REPO / ".ci" / "burner.py"


def burner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BURNER), *args], capture_output=True, text=True, timeout=HANG_S
    )


def pids(pidfile: Path) -> list[int]:
    return [int(b["pid"]) for b in json.loads(pidfile.read_text())["burners"]]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(path: Path) -> str:
    """A burner's note, once it has written it (a wait on an event, failing only on a hang)."""
    deadline = time.monotonic() + HANG_S
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"no {path.name} within {HANG_S:.0f} s"
        time.sleep(0.05)
    return path.read_text()


def test_burners_run_until_ended_by_their_pids(tmp_path: Path) -> None:
    pidfile = tmp_path / "burners.json"
    started = burner("start", "2", str(pidfile), "--watch", str(os.getpid()))
    assert started.returncode == 0 and started.stdout.startswith("burners: 2 CPU-bound processes")
    running = pids(pidfile)
    assert len(running) == 2 and all(alive(pid) for pid in running)
    ended = burner("end", str(pidfile))
    assert ended.returncode == 0, ended.stderr
    assert "s of CPU in" in ended.stdout and not pidfile.exists()
    assert not any(alive(pid) for pid in running)


def test_a_burner_that_was_signalled_fails_the_run(tmp_path: Path) -> None:
    pidfile = tmp_path / "burners.json"
    assert burner("start", "2", str(pidfile), "--watch", str(os.getpid())).returncode == 0
    victim, survivor = pids(pidfile)
    doomed = psutil.Process(victim)
    os.kill(victim, signal.SIGKILL)  # what a test that signalled a foreign process would do
    assert wait_gone([doomed], HANG_S) == []  # the kill lands when the victim is next scheduled
    ended = burner("end", str(pidfile))
    assert ended.returncode == 1
    assert f"FAIL: burner(s) {victim} (gone, no note: signalled) ended before the suite did" in ended.stderr
    assert not alive(survivor), "the others are still ended"


def test_a_burner_ends_by_itself_when_its_lifetime_is_over_and_the_run_says_it_ran_short(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "burners.json"
    assert burner("start", "1", str(pidfile), "--watch", str(os.getpid()), "--max-s", "0.2").returncode == 0
    assert wait_for(tmp_path / "burners.json.0.ended") == "its lifetime was over"
    ended = burner("end", str(pidfile))
    assert ended.returncode == 1 and "ended by themselves before the suite did" in ended.stderr
    assert "raise --max-s" in ended.stderr and not (tmp_path / "burners.json.0.ended").exists()


def test_a_burner_ends_by_itself_once_the_process_it_watches_is_gone(tmp_path: Path) -> None:
    watched = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    pidfile = tmp_path / "burners.json"
    try:
        assert burner("start", "1", str(pidfile), "--watch", str(watched.pid)).returncode == 0
    finally:
        assert watched.stdin is not None
        watched.stdin.close()
        watched.wait(HANG_S)
    assert wait_for(tmp_path / "burners.json.0.ended") == "the watched process was gone"
    ended = burner("end", str(pidfile))
    assert ended.returncode == 1 and "(the watched process was gone)" in ended.stderr


def test_a_count_or_lifetime_out_of_bounds_is_refused(tmp_path: Path) -> None:
    for args in (["65"], ["-1"], ["1", "--max-s", "0"]):
        done = burner("start", args[0], str(tmp_path / "b.json"), "--watch", str(os.getpid()), *args[1:])
        assert done.returncode == 2 and not (tmp_path / "b.json").exists()
