"""How fast `launch` answers (a benchmark, not a test): `launch --help`, and `launch --profile` until
the engine is spawned, beside `python -c pass`; paired runs against another checkout.

- help: the wall time of `launch --help` (goal < 0.3 s);
- spawn: from running `launch --profile NAME` to the engine's spawn, read from the `start` record
  the launcher writes right after it (the engine is the simulator; the launcher is then stopped).
With `--before TREE` each run alternates between that checkout (through PYTHONPATH, which comes
before the editable install) and this one, so both see the same load. Bytecode is cached under
`--pycache` (PYTHONPYCACHEPREFIX, outside the checkout), as an installed package has it: with
PYTHONDONTWRITEBYTECODE=1 every start compiles ~100 modules again (~0.5 s here). `--pycache ''`
measures that case.

Run: `.venv/bin/python bench/bench_cli_start.py --runs 15 --before /tmp/base` from the repository root.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_supervisor import ts  # noqa: E402
from bench.shared_host import PREFLIGHT_REFUSED  # noqa: E402
from launcher.supervisor.history import Event  # noqa: E402
from tests.launcher_run import LAUNCH, Launcher, free_port, write_profile  # noqa: E402

PYCACHE = ""


def env_for(tree: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    if PYCACHE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = PYCACHE
    return env


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def to_spawn(root: Path, tree: Path | None) -> float:
    for attempt in range(300):
        seconds = try_spawn(root / f"try-{attempt}", tree)
        if seconds is not None:
            return seconds
        time.sleep(2)
    raise RuntimeError("preflight refused 300 times: foreign vLLM orphans on this host?")


def try_spawn(root: Path, tree: Path | None) -> float | None:
    launcher = Launcher(root / "profiles", root / "state", "bench")
    (root / "profiles").mkdir(parents=True)
    write_profile(launcher.profiles, "bench", free_port())
    saved = dict(os.environ)
    os.environ.update(env_for(tree))
    try:
        launched = time.time()
        launcher.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        deadline = time.monotonic() + 60
        while not (starts := [r for r in launcher.history() if r["event"] == Event.START]):
            if launcher.proc.poll() == PREFLIGHT_REFUSED:  # type: ignore[union-attr]
                return None  # a foreign vLLM orphan on this shared host: try again
            if time.monotonic() > deadline or launcher.proc.poll() is not None:  # type: ignore[union-attr]
                raise RuntimeError(f"no engine spawned:\n{launcher.output()}")
            time.sleep(0.01)
        launcher.signal(signal.SIGTERM)
        launcher.wait_exit(60)
        return ts(starts[0]) - launched
    finally:
        launcher.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--spawn-runs", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another checkout to run paired with this one")
    parser.add_argument("--pycache", default="/tmp/bench-cli-pycache", help="'' = compile every time")
    options = parser.parse_args()
    global PYCACHE
    PYCACHE = options.pycache
    arms: dict[str, Path | None] = {"after": None}
    if options.before is not None:
        arms = {"before": options.before.resolve(), **arms}
    rows: dict[str, list[float]] = {f"{arm} {what}": [] for what in ("help", "spawn") for arm in arms}
    rows["python -c pass"] = []
    for tree in arms.values():  # the first start writes the bytecode cache
        wall([str(LAUNCH), "--help"], env_for(tree))
    for _ in range(options.runs):
        rows["python -c pass"].append(wall([sys.executable, "-c", "pass"], env_for(None)))
        for arm, tree in arms.items():
            rows[f"{arm} help"].append(wall([str(LAUNCH), "--help"], env_for(tree)))
    for _ in range(options.spawn_runs):
        for arm, tree in arms.items():
            with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
                rows[f"{arm} spawn"].append(to_spawn(Path(tmp), tree))
    cache = f"bytecode cached in {PYCACHE}" if PYCACHE else "no bytecode cache"
    print(f"{options.runs} help runs, {options.spawn_runs} spawn runs, {cache}, {os.cpu_count()} CPUs (s):")
    for name, values in rows.items():
        print(f"  {name:<16} min {min(values):6.3f}   median {statistics.median(values):6.3f}"
              f"   max {max(values):6.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
