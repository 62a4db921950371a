"""Benchmark: prometheus_client's text parser against the hand-written one it replaced.

    .venv/bin/python bench/bench_metrics_parse.py [--runs 200]

Both read a real vLLM 0.26.0 `/metrics` page (tests/data/bench/vllm-0.26.0-metrics-after.txt).
The bench scrapes twice per round, outside the timed window, so what matters is that a parse costs
milliseconds, not microseconds; and that both agree on every sample (they must, or one is wrong).
Medians of `--runs` parses are reported.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from launcher.bench.server_metrics import parse_text  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "tests" / "data" / "bench" / "vllm-0.26.0-metrics-after.txt"
# The regex parser as it was (it dropped samples whose label values hold `}`): the reference.
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")


def regex_parse(text: str) -> dict[str, float]:
    sums: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if not match:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        name = match.group("name")
        sums[name] = (
            min(sums.get(name, value), value) if name.endswith("_created") else sums.get(name, 0.0) + value
        )
    return sums


def median_ms(parse: object, text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        parse(text)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    text = PAGE.read_text(encoding="utf-8")
    ours, theirs = parse_text(text), regex_parse(text)
    differ = sorted(
        k for k in ours.keys() | theirs.keys() if not math.isclose(ours.get(k, -1), theirs.get(k, -2))
    )
    lines = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    print(f"page: {PAGE.name}, {len(text):,} bytes, {lines} sample lines, {len(ours)} summed names")
    print(f"samples that differ: {len(differ)} {differ[:5]}")
    new, old = median_ms(parse_text, text, runs), median_ms(regex_parse, text, runs)
    print(
        f"prometheus_client parser: {new:.2f} ms median; regex parser: {old:.2f} ms; ratio {new / old:.1f}x"
    )


if __name__ == "__main__":
    main()
