"""What the log keeper costs the launcher (a benchmark, not a test): the delay a line takes from
vLLM's write to the launcher's live log (what gates wait on), with and without the keeper between.

Each run starts a real engine process that writes a timestamped line every 5 ms; arms alternate
(keeper / direct pipe, the launcher writing the file itself as before the keeper), so both see the
same machine load. Reported: median and p99 of the per-line delay, and the median time from
`start()` to the first line (the keeper's own Python start is in it).

Run: `.venv/bin/python bench/bench_logkeeper.py --runs 10` from the repository root.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from launcher.supervisor.engine import EngineProcess  # noqa: E402
from launcher.supervisor.livelog import LiveLog  # noqa: E402

LINES = 400
ENGINE = (
    "import sys, time\n"
    f"for n in range({LINES}):\n"
    "    sys.stdout.write(f'{time.time():.6f} INFO line {n}\\n'); sys.stdout.flush(); time.sleep(0.005)\n"
)


def one_run(root: Path, keeper: bool) -> tuple[list[float], float]:
    delays: list[float] = []
    first: list[float] = []
    done = threading.Event()
    path = root / ("keeper" if keeper else "direct") / "engine.log"
    log = LiveLog(None if keeper else path)

    def sink(stream: str, text: str) -> None:
        now = time.time()
        if not first:
            first.append(time.monotonic())
        for line in text.splitlines():
            delays.append(now - float(line.split()[0]))
        log.feed(stream, text)

    engine = EngineProcess([sys.executable, "-c", ENGINE], {"PATH": "/usr/bin:/bin"}, sink,
                           log_path=path if keeper else None)  # fmt: skip
    engine.on_exit(done.set)
    started = time.monotonic()
    engine.start()
    done.wait(timeout=60)
    engine.stop(grace_s=5)
    log.close()
    assert len(delays) == LINES, (keeper, len(delays))
    return delays, first[0] - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    options = parser.parse_args()
    results: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []), "keeper": ([], [])}
    with tempfile.TemporaryDirectory(prefix="bench-logkeeper-") as tmp:
        for _ in range(options.runs):
            for name in ("direct", "keeper"):
                delays, first = one_run(Path(tmp), name == "keeper")
                results[name][0].extend(delays)
                results[name][1].append(first)
    for name, (delays, firsts) in results.items():
        delays.sort()
        p99 = delays[int(len(delays) * 0.99)]
        print(f"{name:7s} delay median {statistics.median(delays) * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms; "
              f"start to first line median {statistics.median(firsts) * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
