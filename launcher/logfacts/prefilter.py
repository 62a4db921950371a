"""Which lines are worth parsing: a few C-speed scans over a whole chunk instead of a loop per line.

A running server's log is almost all periodic stats and access lines; the lines that carry facts
are a few hundred. `str.find` is a fast substring search, and `re` finds a pattern that starts
with a literal quickly too (each extra pass costs ~0.3–1 ms per MB, docs/logs.md), so the scan is:
- one regex on `] ` (the end of vLLM's prefix) followed by the head of a message the parser reads
  (heads are constant format text in vLLM, FACTS §2–§5; all start with a literal or a tiny class,
  which keeps the alternation cheap on the millions of `] Engine 000: ...` stats lines);
- long literals for unprefixed text: tqdm bars, uvicorn's readiness and bind errors, systemd exits;
- `Traceback (most recent call last)`, which opens a window of following lines (the exception line
  that names the cause comes at the end of the traceback, in any format);
- near the start of the stream only (deterministic: the first `HEAD_CHARS` characters): an echoed
  `vllm serve ...` command line and argparse's `vllm: error:`, which happen before anything else;
- the operator's markers.
A hit selects its whole physical line; everything else is skipped unparsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.logfacts import failure
from launcher.logfacts.markers import MarkerSet

HEAD_CHARS = 4 * 1024 * 1024
TRACEBACK_WINDOW = 400  # physical lines after a traceback header that are parsed

_HEADS = (
    r"vLLM ", r"[ █▄▀]", r"non-default args", r"args: ", r"Initializing an? ", r"Using ", r"Chunked prefill",
    r"Model ", r"Loading ", r"Starting ", r"torch\.compile",
    r"Profiling CUDA graph", r"Memory profiling", r"Available KV cache", r"GPU KV cache size", r"GPU \+ host",
    r"CPU KV cache size", r"XPU KV cache size", r"Maximum concurrency", r"# GPU blocks", r"Capturing ",
    r"Graph capturing", r"Skipping ", r"init engine", r"Enforce eager", r"Cudagraph is disabled",
    r"Free memory on device", r"No available memory", r"To serve at least", r"EngineCore", r"Engine core",
    r"WorkerProc ", r"Worker proc ", r"Frontend process", r"Failed to load model", r"\[shutdown\]",
    r"Timed out waiting", r"User-specified max_model_len",
)
_RECORD = re.compile(r"\] (?:" + "|".join(_HEADS) + ")")
_LITERALS = (
    "CUDA graph", "point shards",  # tqdm bars (`Capturing CUDA graphs (FULL): ...`), also glued to text
    "Application startup complete", "Application shutdown complete", "Uvicorn running on",  # uvicorn
    "address already in use",  # uvicorn's own bind error (older releases)
    "Main process exited", "exited with code",  # systemd, docker compose
)
_HEAD_LITERALS = ("vllm serve", "vllm.entrypoints.openai.api_server", "vllm: error")
TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True, slots=True)
class Hits:
    starts: list[int]  # sorted offsets of candidate physical lines
    tracebacks: list[int]  # sorted offsets of lines holding a traceback header


class Prefilter:
    def __init__(self, markers: MarkerSet) -> None:
        self._regexes = (_RECORD, failure.SCAN, *markers.scan)
        self._every_line = markers.every_line

    def scan(self, text: str, end: int, stream_offset: int) -> Hits:
        """Candidates among the physical lines of `text[:end]`; `stream_offset` is where `text`
        starts in the whole stream (for the head-of-stream literals)."""
        headers = {text.rfind("\n", 0, h) + 1 for h in _positions(text, TRACEBACK, 0, end)}
        if self._every_line:
            every = [0]
            i = text.find("\n", 0, end)
            while 0 <= i < end - 1:
                every.append(i + 1)
                i = text.find("\n", i + 1, end)
            return Hits(every, sorted(headers))
        hits: list[int] = []
        for rx in self._regexes:
            hits.extend(m.start() for m in rx.finditer(text, 0, end))
        for literal in _LITERALS:
            hits.extend(_positions(text, literal, 0, end))
        head_end = min(end, HEAD_CHARS - stream_offset)
        if head_end > 0:
            for literal in _HEAD_LITERALS:
                hits.extend(_positions(text, literal, 0, head_end))
        starts = {text.rfind("\n", 0, h) + 1 for h in hits} | headers
        return Hits(sorted(starts), sorted(headers))


def _positions(text: str, literal: str, start: int, end: int) -> list[int]:
    found = []
    i = text.find(literal, start, end)
    while i >= 0:
        found.append(i)
        i = text.find(literal, i + len(literal), end)
    return found
