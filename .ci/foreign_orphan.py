"""A foreign deployment's orphaned `vllm-sim`, for `.ci/run`: the suite must pass beside it and must
never signal it (issue 13, point 9).

    python .ci/foreign_orphan.py start PIDFILE   # orphan it (parent gone), wait until it answers
    python .ci/foreign_orphan.py end PIDFILE     # fail unless it is still alive; then end it by pid

It carries another deployment's mark (VLLM_GATE_DEPLOYMENT, as a launcher gives vLLM), so preflight
must see it as someone else's orphan on no GPU of ours: a warning, never a refusal or a reap.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

READY_S = 120.0
MARK = "ci-foreign@/nonexistent/ci-foreign-state"


def start(pidfile: Path) -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    sim = Path(sys.executable).with_name("vllm-sim")
    env = {**os.environ, "VLLM_GATE_PROFILE": "ci-foreign", "VLLM_GATE_DEPLOYMENT": MARK, "SPT_NOENV": "1"}
    # An intermediate process starts the server and exits at once: the server's parent is gone.
    starter = subprocess.run(
        [sys.executable, "-c",
         "import subprocess, sys; log = open(sys.argv[1], 'ab'); p = subprocess.Popen(sys.argv[2:], "
         "start_new_session=True, stdout=log, stderr=subprocess.STDOUT); print(p.pid)",
         str(pidfile.with_suffix(".log")),
         str(sim), "serve", "ci/foreign-1b", "--port", str(port), "--sim-speed", "50"],
        env=env, capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    pid = int(starter.stdout.strip())
    pidfile.write_text(json.dumps({"pid": pid, "create_time": _started(pid), "port": port}))
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    print(f"foreign orphan: vllm-sim pid {pid} on port {port}, mark {MARK}")
                    return 0
        except OSError:
            time.sleep(0.2)
    print(f"foreign orphan pid {pid} never answered /health", file=sys.stderr)
    return 1


def end(pidfile: Path) -> int:
    info = json.loads(pidfile.read_text())
    pid = int(info["pid"])
    alive = _started(pid) == info["create_time"] and "vllm-sim" in _cmdline(pid)
    if alive:
        os.kill(pid, signal.SIGTERM)  # the server ends its own engine core, as vLLM does
        deadline = time.monotonic() + 30
        while _started(pid) == info["create_time"] and time.monotonic() < deadline:
            time.sleep(0.1)
        if _started(pid) == info["create_time"]:
            os.kill(pid, signal.SIGKILL)
    pidfile.unlink()
    if not alive:
        print(f"FAIL: the foreign orphan vllm-sim pid {pid} was signalled by the test suite; its log: "
              f"{pidfile.with_suffix('.log')}", file=sys.stderr)  # fmt: skip
        return 1
    print(f"foreign orphan pid {pid} survived the suite untouched; ended it")
    pidfile.with_suffix(".log").unlink(missing_ok=True)
    return 0


def _started(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): tells it from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] == "Z" else fields[19]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit({"start": start, "end": end}[sys.argv[1]](Path(sys.argv[2])))
