"""CPU-bound neighbours for `.ci/run`: the suite must pass on a busy host (issue 34, point 2).

    python .ci/burner.py start N PIDFILE --watch PID   # N busy loops at the suite's own priority
    python .ci/burner.py end PIDFILE                   # fail unless all are still alive; end them by pid

Each burner is bounded: it spins until its lifetime is over (--max-s, default 3600 s) or until the
watched process (`.ci/run`'s shell) is gone, whichever comes first, so a CI job that is killed
leaves no burner behind; a burner that ends by itself leaves a note saying which. `end` reports the
CPU time they burned, which shows the load was real, and fails unless every burner was still
spinning: a suite that outlived the burners' lifetime ran partly unloaded, and a burner that is
gone without a note was signalled (by a test?).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Spins, looking up about 20 times a second whether its time is up or the watched process is gone;
# on ending by itself, writes why into its note file (argv[3]).
SPIN = """
import os, sys, time
end, watched, note = time.monotonic() + float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def watched_alive():
    try:
        os.kill(watched, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
while time.monotonic() < end and watched_alive():
    stop = time.monotonic() + 0.05
    while time.monotonic() < stop:
        pass
with open(note, "w") as out:
    out.write("its lifetime was over" if time.monotonic() >= end else "the watched process was gone")
"""


def start(count: int, pidfile: Path, watch: int, max_s: float) -> int:
    burners = []
    for k in range(count):
        note = pidfile.with_name(f"{pidfile.name}.{k}.ended")
        note.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", SPIN, str(max_s), str(watch), str(note)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # holds no pipe of the caller open for the burner's life
            start_new_session=True,  # a signal meant for the suite's group never reaches them
        )
        burners.append({"pid": proc.pid, "create_time": _stat(proc.pid)[0], "note": str(note)})
    pidfile.write_text(json.dumps({"burners": burners, "started": time.monotonic()}))
    pids = " ".join(str(b["pid"]) for b in burners)
    print(f"burners: {count} CPU-bound processes beside the suite (pids {pids})")
    return 0


def end(pidfile: Path) -> int:
    info = json.loads(pidfile.read_text())
    wall = time.monotonic() - float(info["started"])
    cpu, lost, expired = 0.0, [], []
    for burner in info["burners"]:
        pid, started, note = int(burner["pid"]), burner["create_time"], Path(burner["note"])
        now_started, ticks = _stat(pid)
        if now_started != started:
            (expired if note.exists() else lost).append(f"{pid} ({_read_note(note)})")
            continue
        cpu += ticks / os.sysconf("SC_CLK_TCK")
        os.kill(pid, signal.SIGKILL)  # a busy loop has nothing to clean up
    for burner in info["burners"]:
        _reap(int(burner["pid"]))
        Path(burner["note"]).unlink(missing_ok=True)
    pidfile.unlink()
    cores = cpu / wall if wall > 0 else 0.0
    print(f"burners: {cpu:.0f} s of CPU in {wall:.0f} s beside the suite ({cores:.2f} cores)")
    if expired:
        print(f"FAIL: burner(s) {', '.join(expired)} ended by themselves before the suite did: "
              "it ran partly without its load (raise --max-s)", file=sys.stderr)  # fmt: skip
    if lost:
        print(f"FAIL: burner(s) {', '.join(lost)} ended before the suite did (signalled by a test?)",
              file=sys.stderr)  # fmt: skip
    return 1 if expired or lost else 0


def _read_note(note: Path) -> str:
    try:
        return note.read_text()[:80] or "no reason written"
    except OSError:
        return "gone, no note: signalled"


def _stat(pid: int) -> tuple[str | None, int]:
    """(start time, utime + stime in ticks) from /proc/PID/stat; (None, 0) when it is gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, 0
    fields = text[text.rfind(")") + 2 :].split()
    if fields[0] == "Z":
        return None, 0
    return fields[19], int(fields[11]) + int(fields[12])


def _reap(pid: int) -> None:
    """Wait for a killed burner to be gone (it is init's child by now, or still ours)."""
    deadline = time.monotonic() + 10
    while _stat(pid)[0] is not None and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    begin = sub.add_parser("start")
    begin.add_argument("count", type=int)
    begin.add_argument("pidfile", type=Path)
    begin.add_argument("--watch", type=int, required=True, help="end when this process is gone")
    begin.add_argument("--max-s", type=float, default=3600.0)
    finish = sub.add_parser("end")
    finish.add_argument("pidfile", type=Path)
    args = parser.parse_args()
    if args.command == "start":
        if not 0 <= args.count <= 64:
            parser.error("count: 0 to 64 burners")
        if not 0 < args.max_s <= 86400:
            parser.error("--max-s: more than 0, at most a day")
        return start(args.count, args.pidfile, args.watch, args.max_s)
    return end(args.pidfile)


if __name__ == "__main__":
    sys.exit(main())
