"""What the weights' read-ahead takes out of a change's outage, on this host's disk (a benchmark, not a test).

One run: a model dir of `--files` safetensors files, `--gib` GiB in all, written once on the disk
under `--dir` (not /tmp where it is a tmpfs: the page cache would be the disk); then per run
1. evicted (POSIX_FADV_DONTNEED), the load vLLM would do timed: every file read once, sequentially
   (`cold`: the outage's disk time today);
2. evicted again, the launcher's read-ahead timed (launcher/host/page_cache.py `warm`, while
   production would still serve: no outage), then the same load timed (`after_read_ahead`: what
   is left of the disk in the outage);
beside `cached_share` (mincore) before and after. Medians of `--runs`; GB are decimal, as disks are rated.

Run: `.venv/bin/python bench/bench_warm_weights.py --gib 2 --runs 5` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from basis.clock import SYSTEM_CLOCK  # noqa: E402
from launcher.host.page_cache import WeightFiles, cached_share, warm, weight_files  # noqa: E402

CHUNK = 16 << 20


def write_model(root: Path, files: int, total_bytes: int) -> WeightFiles:
    root.mkdir(parents=True, exist_ok=True)
    size = total_bytes // files
    block = os.urandom(CHUNK)
    for index in range(files):
        path = root / f"model-{index + 1:05d}-of-{files:05d}.safetensors"
        if path.exists() and path.stat().st_size == size:
            continue
        with path.open("wb") as out:
            for start in range(0, size, CHUNK):
                out.write(block[: min(CHUNK, size - start)])
            out.flush()
            os.fsync(out.fileno())
    found = weight_files(str(root))
    assert isinstance(found, WeightFiles), found
    return found


def evict(weights: WeightFiles) -> None:
    for path in weights.files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def load(weights: WeightFiles) -> float:
    """vLLM's load as the disk sees it: each file read once, in order; its seconds."""
    started = time.perf_counter()
    buffer = bytearray(CHUNK)
    for path in weights.files:
        with path.open("rb", buffering=0) as f:
            while f.readinto(buffer):
                pass
    return time.perf_counter() - started


def one_run(weights: WeightFiles) -> dict[str, float | None]:
    evict(weights)
    evicted_share = cached_share(weights)
    cold = load(weights)
    evict(weights)
    ahead = warm(weights, SYSTEM_CLOCK, SYSTEM_CLOCK.monotonic() + 3600)
    warmed_share = cached_share(weights)
    after = load(weights)
    gb = weights.total_bytes / 1e9
    return {
        "cached_before": evicted_share,
        "cold_s": cold,
        "cold_gb_s": gb / cold,
        "read_ahead_s": ahead.seconds,
        "cached_after_read_ahead": warmed_share,
        "after_read_ahead_s": after,
        "after_read_ahead_gb_s": gb / after,
    }


def positive(kind: type[float] | type[int]) -> Callable[[str], float]:
    """An argparse type: a finite number above zero, else argparse's usage error (exit 2)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be above zero")
        return value

    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=positive(float), default=2.0)
    parser.add_argument("--files", type=positive(int), default=4)
    parser.add_argument("--runs", type=positive(int), default=5)
    parser.add_argument("--dir", type=Path, default=Path(".bench-warm-weights"))
    parser.add_argument("--keep", action="store_true", help="Keep the model dir for the next run.")
    args = parser.parse_args()
    weights = write_model(args.dir, args.files, int(args.gib * (1 << 30)))
    runs = [one_run(weights) for _ in range(args.runs)]
    medians = {key: statistics.median(float(r[key] or 0.0) for r in runs) for key in runs[0]}
    medians["outage_ratio"] = medians["cold_s"] / medians["after_read_ahead_s"]
    print(
        json.dumps({"loadavg": os.getloadavg(), "gib": args.gib, "runs": runs, "median": medians}, indent=1)
    )
    print(
        f"{args.gib:g} GiB: the load read {medians['cold_gb_s']:.2f} GB/s from disk, "
        f"{medians['after_read_ahead_gb_s']:.2f} GB/s after the read-ahead "
        f"({medians['read_ahead_s']:.1f} s while production serves): the outage's disk time "
        f"{medians['cold_s']:.2f} s -> {medians['after_read_ahead_s']:.2f} s "
        f"(x{medians['outage_ratio']:.1f}), median of {args.runs}"
    )
    if not args.keep:
        for path in weights.files:
            path.unlink()
        args.dir.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
