"""`launch check` as a probe, against the simulator (a benchmark, not a test): how long the whole
command takes, as a kubelet or Ansible would run it (a new process each time), median of N runs:

- the default set (health + served model + one tool call), and health alone (the readiness probe);
- `--full` (every tool-call case of the profile);
- the in-process part (the gates only) vs the process start (Python, imports).

The simulator answers at `--sim-speed 1` (its decode model for a real 8B on one GPU), so the
tool-call figure is the simulator's, not a real model's; the H200 figure is in docs/fleet.md.

Run: `.venv/bin/python bench/bench_check.py [--runs 15]` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.launcher_run import LAUNCH, write_profile  # noqa: E402
from tests.simserver import running_sim  # noqa: E402

CASES = ["auto", "required", "named", "no_tool", "auto_stream"]


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds of the whole command, and the gates' own seconds from its JSON."""
    started = time.monotonic()
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stdout}{done.stderr}")
    return took, float(json.loads(done.stdout)["duration_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--speed", type=float, default=1.0, help="the simulator's --sim-speed")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-check-"))
    (root / "profiles").mkdir()
    sim_args = ["--served-model-name", "sim", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    # The simulator alone, as a server someone else started: `launch check` needs no launcher.
    with running_sim(sim_args, speed=args.speed, model="test/sim-1b", ready_timeout_s=300) as sim:
        write_profile(root / "profiles", "bench", sim.port, args={"sim_speed": args.speed},
                      gates={"tool_call": {"cases": CASES}})  # fmt: skip
        base = [str(LAUNCH), "--profiles-dir", str(root / "profiles"), "check", "--profile", "bench"]
        variants = {
            "default (health + tool_call, 1 case)": base,
            "health only (readiness probe)": [*base, "--gates", "health"],
            "--full (5 tool-call cases)": [*base, "--full"],
        }
        print(f"launch check against vllm-sim --sim-speed {args.speed:g}, median of {args.runs} runs")
        for name, argv in variants.items():
            runs = [timed(argv) for _ in range(args.runs)]
            wall = statistics.median(r[0] for r in runs)
            gates = statistics.median(r[1] for r in runs)
            print(f"  {name:<38} command {wall:6.3f} s  gates {gates:6.3f} s  start-up {wall - gates:6.3f} s")


if __name__ == "__main__":
    main()
