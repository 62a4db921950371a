"""The tracebacks of two vLLM logs compared: how many, in which process, frame by frame, and the
exception they end in. A failure's shape is its tracebacks (0.26.0's free-memory refusal: the
engine's 8 frames, the same again under `Process EngineCore:`, the API server's 24).

Frames are compared as `path-from-the-package:line function` (`vllm/v1/engine/core.py:1299
run_engine_core`, `asyncio/runners.py:194 run`): where Python and vLLM are installed is the host's.
"""

from __future__ import annotations

import re
from pathlib import Path

from logdiff import Row, classify, windows

FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
# where Python and the packages live: site-packages, dist-packages, a `site` folder, the stdlib
TAIL = re.compile(r"^.*/(?:site|site-packages|dist-packages|python3\.\d+)/")


def short(path: str) -> str:
    return TAIL.sub("", path)


def tracebacks(path: Path) -> list[tuple[str, list[str], str]]:
    """(process, frames, exception type) of each `Traceback (most recent call last):` of the startup
    and the shutdown (request-time ones, such as hermes' parse failure, depend on the requests)."""
    text = path.read_bytes().decode("utf-8", "replace").splitlines()
    lines = windows([classify(i + 1, t) for i, t in enumerate(text)])
    found: list[tuple[str, list[str], str]] = []
    current: tuple[str, list[str]] | None = None
    for line in lines:
        msg = line.msg
        if msg.startswith("Traceback (most recent call last):"):
            current = (line.proc, [])
            continue
        if current is None:
            continue
        if m := FRAME.match(msg):
            current[1].append(f"{short(m['path'])}:{m['line']} {m['func']}")
        elif msg.startswith(" ") or not msg:
            continue  # the source excerpt and its carets under a frame
        else:
            found.append((current[0], current[1], msg.split(":", 1)[0]))
            current = None
    return found


def traceback_rows(real_path: Path, sim_path: Path) -> list[Row]:
    real, sim = tracebacks(real_path), tracebacks(sim_path)
    rows = [Row("tracebacks", "count", str(len(real)), str(len(sim)))]
    for i in range(max(len(real), len(sim))):
        r = real[i] if i < len(real) else ("-", [], "absent")
        s = sim[i] if i < len(sim) else ("-", [], "absent")
        rows.append(Row("tracebacks", f"#{i + 1} process, exception", f"{r[0]} {r[2]}", f"{s[0]} {s[2]}"))
        rows.append(Row("tracebacks", f"#{i + 1} frames", f"{len(r[1])}", f"{len(s[1])}"))
        for j in range(max(len(r[1]), len(s[1]))):
            rf = r[1][j] if j < len(r[1]) else "absent"
            sf = s[1][j] if j < len(s[1]) else "absent"
            if rf != sf:
                rows.append(Row("tracebacks", f"#{i + 1} frame {j + 1}", rf, sf))
    return rows
