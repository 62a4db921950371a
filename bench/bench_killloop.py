"""Kill-loop (a benchmark, not a test): SIGKILL `launch set`, `launch rollback` and the launcher at
random moments, then check every file they write. Counts kills, corrupted files (a profile, `.bak`
or state file that no longer parses or fails its shape check), torn history records, and stray
temp files — left by a kill, and left after the next run (which should remove them).

Run: `.venv/bin/python bench/bench_killloop.py [--kills 200] [--launcher-every 10] [--seed 1]`
from the repository root. Every process it starts is ended by pid; engines are found by the
profile name it made up (VLLM_GATE_PROFILE), never by a pattern.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from launcher.atomicfile import STRAY_RE  # noqa: E402
from launcher.errors import BadInput  # noqa: E402
from launcher.state.store import StateStore  # noqa: E402
from launcher.supervisor.history import History  # noqa: E402
from launcher.supervisor.status import read_status  # noqa: E402
from tests.launcher_run import free_port, write_profile  # noqa: E402

LAUNCH = Path(sys.executable).with_name("launch")


@dataclass
class Tally:
    kills: dict[str, int] = field(default_factory=lambda: {"set": 0, "rollback": 0, "launcher": 0})
    finished_first: int = 0  # runs that ended before their kill came (not counted as kills)
    corrupt: list[str] = field(default_factory=list)
    torn_history: int = 0
    strays_left_by_kills: int = 0
    strays_after_next_run: int = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--launcher-every", type=int, default=10, help="every Nth kill is the launcher's")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="killloop-") as tmp:
        root = Path(tmp)
        profile = f"kl{os.getpid()}"
        profiles, state = root / "profiles", root / "state"
        profiles.mkdir()
        write_profile(profiles, profile, free_port())
        tally = Tally()
        base = [str(LAUNCH), "--profiles-dir", str(profiles), "--state-dir", str(state)]
        _run(base + ["set", profile, "max_num_seqs=2", "--tag", "a"])  # two snapshots to roll back to
        _run(base + ["set", profile, "max_num_seqs=4", "--tag", "b"])
        started = time.monotonic()
        for index in range(args.kills):
            if args.launcher_every and index % args.launcher_every == args.launcher_every - 1:
                kind, argv, delay = "launcher", base + ["--profile", profile], rng.uniform(0.2, 4.0)
            elif rng.random() < 0.5:
                seqs = rng.choice([1, 2, 3, 4])
                kind, argv = "set", base + ["set", profile, f"max_num_seqs={seqs}", "--tag", f"t{index % 7}",
                                            "--force-tag"]  # fmt: skip
                delay = rng.uniform(0.0, 1.2)
            else:
                kind, argv, delay = "rollback", base + ["rollback", rng.choice("ab"), "--profile", profile], \
                    rng.uniform(0.0, 1.2)  # fmt: skip
            if _kill_after(argv, delay, profile):
                tally.kills[kind] += 1
            else:
                tally.finished_first += 1
            tally.strays_left_by_kills += _count_strays(profiles, state, profile)
            _check(profiles, state, profile, tally, f"after kill {index} ({kind})")
        _run(base + ["set", profile, "max_num_seqs=2", "--tag", "final", "--force-tag"])
        _serve_then_stop(base + ["--profile", profile], state / "profiles" / profile / "status.json", profile)
        tally.strays_after_next_run = _count_strays(profiles, state, profile, only_dead=True)
        _report(tally, time.monotonic() - started)


def _run(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, timeout=120, check=False)


def _kill_after(argv: list[str], delay_s: float, profile: str) -> bool:
    """Start, SIGKILL after `delay_s`; False when it had finished by then."""
    proc = _start(argv)
    killed = False
    try:
        proc.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        killed = True
    proc.wait()
    _end_engines(profile)
    return killed


def _serve_then_stop(argv: list[str], status_path: Path, profile: str) -> None:
    """One clean start (it tidies what the kills left in the state dir), then SIGTERM."""
    proc = _start(argv)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if (read_status(status_path) or {}).get("phase") == "serving":
                break
        except BadInput:
            pass
        time.sleep(0.2)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    _end_engines(profile)


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    quiet = subprocess.DEVNULL
    return subprocess.Popen(argv, stdout=quiet, stderr=quiet, start_new_session=True)


def _end_engines(profile: str) -> None:
    """The engines of this profile (started by the killed launcher): they end themselves on the
    launcher's death (parent-death signal); anything still there after 20 s is killed by pid."""
    deadline = time.monotonic() + 20
    while (left := _engines(profile)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            continue


def _engines(profile: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("VLLM_GATE_PROFILE") == profile and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _count_strays(profiles: Path, state: Path, profile: str, only_dead: bool = False) -> int:
    dirs = [profiles, state, state / "profiles" / profile]
    strays = [p for d in dirs if d.is_dir() for p in d.iterdir() if p.name.endswith(".tmp")]
    if only_dead:
        strays = [p for p in strays if (m := STRAY_RE.match(p.name)) and not psutil.pid_exists(int(m["pid"]))]
    return len(strays)


def _check(profiles: Path, state: Path, profile: str, tally: Tally, when: str) -> None:
    for path in profiles.glob(f"{profile}.toml*"):
        if path.name.endswith(".tmp"):
            continue
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            tally.corrupt.append(f"{when}: {path.name}: {err}")
    store = StateStore(state)
    for read in (lambda: store.last_good_to_start(profile), lambda: store.last_facts(profile),
                 lambda: read_status(store.profile_dir(profile) / "status.json")):  # fmt: skip
        try:
            read()
        except BadInput as err:
            tally.corrupt.append(f"{when}: {err}")
    tally.torn_history = len(History(store.history_path).scan().skipped)


def _report(tally: Tally, seconds: float) -> None:
    total = sum(tally.kills.values())
    print(f"kills: {total} ({', '.join(f'{k} {v}' for k, v in tally.kills.items())}) in {seconds:.0f} s; "
          f"{tally.finished_first} runs finished before their kill")
    print(f"corrupted files: {len(tally.corrupt)}")
    for line in tally.corrupt[:10]:
        print(f"  {line}")
    print(f"torn history records (skipped by the reader): {tally.torn_history}")
    print(f"stray temp files seen right after a kill (summed over kills): {tally.strays_left_by_kills}")
    print(f"stray temp files of dead writers after the next run: {tally.strays_after_next_run}")


if __name__ == "__main__":
    main()
