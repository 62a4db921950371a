"""Which lines are worth parsing: a few C-speed scans over a whole chunk instead of a loop per line.

A running server's log is almost all periodic stats and access lines; the lines that carry facts
are a few hundred. `str.find` is a fast substring search, and `re` finds a pattern that starts
with a literal quickly too (each extra pass costs ~0.3–1 ms per MB, docs/logs.md), so the scan is:
- one regex on `] ` (the end of vLLM's prefix) followed by the head of a message the parser reads
  (heads are constant format text in vLLM, vllm-facts.md §2–§5; all start with a literal or a tiny class,
  which keeps the alternation cheap on the millions of `] Engine 000: ...` stats lines);
- long literals for unprefixed text: tqdm bars, uvicorn's readiness and bind errors, systemd exits;
- `Traceback (most recent call last)` and a traceback frame's `File "`, each of which opens a window of
  following lines (the exception line that names the cause comes at the end of the traceback, in any
  format; an excerpt may begin inside a traceback, after its header);
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
from launcher.logfacts.patterns import ENGINE_DIED

HEAD_CHARS = 4 * 1024 * 1024
TRACEBACK_WINDOW = 400  # physical lines after a traceback header that are parsed

_HEADS = (
    r"vLLM ",
    r"[ █▄▀]",
    r"non-default args",
    r"args: ",
    r"Initializing an? ",
    r"Using ",
    r"Chunked prefill",
    r"Model ",
    r"Loading ",
    r"Starting ",
    r"torch\.compile",
    r"Compiling a graph",
    r"Directly load the compiled",
    r"Profiling CUDA graph",
    r"Memory profiling",
    r"Available KV cache",
    r"GPU KV cache size",
    r"GPU \+ host",
    r"CPU KV cache size",
    r"XPU KV cache size",
    r"Maximum concurrency",
    r"# \w+ blocks",
    r"the current vLLM",
    r"model weights take",
    r"Capturing ",
    r"Graph capturing",
    r"Skipping ",
    r"init engine",
    r"Enforce eager",
    r"Cudagraph is disabled",
    r"Free memory on device",
    r"No available memory",
    r"To serve at least",
    r"EngineCore",
    r"Engine core",
    r"WorkerProc ",
    r"Worker proc ",
    r"Frontend process",
    r"Failed to load model",
    r"\[shutdown\]",
    r"Timed out waiting",
    r"User-specified max_model_len",
)
_RECORD = re.compile(r"\] (?:" + "|".join(_HEADS) + ")")
_LITERALS = (
    "CUDA graph",
    "point shards",  # tqdm bars (`Capturing CUDA graphs (FULL): ...`), also glued to text
    "Application startup complete",
    "Application shutdown complete",
    "Uvicorn running on",  # uvicorn
    "address already in use",  # uvicorn's own bind error (older releases)
    "Main process exited",
    "exited with code",  # systemd, docker compose
)
_HEAD_LITERALS = ("vllm serve", "vllm.entrypoints.openai.api_server", "vllm: error")
TRACEBACK = "Traceback (most recent call last)"
FRAME = 'File "'  # a traceback frame: `  File "/…/vllm/v1/engine/core.py", line 136, in __init__`


@dataclass(frozen=True, slots=True)
class Hits:
    starts: list[int]  # sorted offsets of candidate physical lines
    tracebacks: list[int]  # sorted offsets of lines holding a traceback header


class Prefilter:
    def __init__(self, markers: MarkerSet) -> None:
        self._regexes = (_RECORD, *markers.scan)
        self.every_line = markers.every_line

    def scan(self, text: str, start: int, end: int, stream_offset: int) -> Hits:
        """Candidates among the physical lines of `text[start:end]` (`start` begins a line);
        `stream_offset` is where `text` starts in the whole stream (for the head-of-stream literals)."""
        found = _positions(text, TRACEBACK, start, end) + _positions(text, FRAME, start, end)
        headers = {_line_start(text, start, h) for h in found}
        if self.every_line:
            every = [start]
            i = text.find("\n", start, end)
            while 0 <= i < end - 1:
                every.append(i + 1)
                i = text.find("\n", i + 1, end)
            return Hits(every, sorted(headers))
        hits: list[int] = []
        for rx in self._regexes:
            hits.extend(m.start() for m in rx.finditer(text, start, end))
        for literal in _LITERALS:
            hits.extend(_positions(text, literal, start, end))
        head_end = min(end, HEAD_CHARS - stream_offset)
        if head_end > start:
            for literal in _HEAD_LITERALS:
                hits.extend(_positions(text, literal, start, head_end))
        starts = {_line_start(text, start, h) for h in hits} | headers | failure_lines(text, start, end)
        return Hits(sorted(starts), sorted(headers))


def open_windows(
    text: str, begin: int, end: int, tracebacks: list[int], carried: int, candidates: set[int]
) -> int:
    """Add the lines of traceback windows to `candidates`; return how many lines run past `end`.
    Windows that overlap are walked once: a traceback's every frame opens one."""
    reached, left_at_reached = begin, 0  # how far the walk got, and how many lines were still owed there
    for start, count in ((begin, carried), *((t, TRACEBACK_WINDOW) for t in tracebacks)):
        if start < reached:
            count -= text.count("\n", start, reached)
            if count <= left_at_reached:
                continue
            start = reached
        pos = start
        while count > 0 and pos < end:
            candidates.add(pos)
            count -= 1
            nl = text.find("\n", pos, end)
            pos = nl + 1 if nl >= 0 else end
        reached, left_at_reached = pos, count
    return left_at_reached if reached >= end else 0


# ---- skimming a startup that a later banner supersedes (restart loops) ---------------------------
# Only its outcome is kept, so only the lines that can decide an outcome are read: readiness, the
# failure rules, a process exit, an engine death, a traceback header. Banners are found by literal.
# Each literal pass costs ~1 ms/MB (more on text holding the logo's non-ASCII glyphs), so few of them.
_BANNER_LITERAL = "version "
_OUTCOME_LITERALS = ("Application startup complete", "exited")  # uvicorn; systemd's and docker's exits
# Every failure line holds one of these: the exception's name (`ValueError`, `GatedRepoError`,
# `huggingface_hub.errors.…`), argparse's `error:`, pydantic's `Value error`, or `… failed`
# (FAILURES in launcher/logfacts/phrasings.py, checked by the catalogue tests). One regex of ~40
# alternatives over a whole chunk costs 0.5 s/MB; these finds and the rules on the lines they hit cost
# ~3 ms/MB. Engine deaths (`Worker proc X died unexpectedly`) are also `_RECORD` heads.
_FAILURE_HINTS = ("rror", "failed")
# At each `ERROR ` (a literal find, ~1 ms/MB): vLLM's stamp, then either a traceback frame of a startup
# logger, or a message that is not indented (logged, it may name no exception: `ERROR … [engine.py:448]
# Bfloat16 is only supported …`). Indented source lines and traceback headers are skipped.
_ERROR_AT = re.compile(
    r"ERROR \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[?[^\]\s]+:\d+\] ?"
    r"(?:(?P<frame>  File \")|(?P<skip> |Traceback))?"
)


_SOURCE_LINE = re.compile(r"^(?:[^\]\n]*\] )?(?:  File \"|    )")


def failure_lines(text: str, start: int, end: int, frames: set[int] | None = None) -> set[int]:
    """Line starts in `text[start:end]` that a failure rule or an engine-death line matches. A startup
    logger's traceback frame (ERROR) decides a failure too: into `frames` when given, else returned."""
    messages, frame_hits = _error_stamps(text, start, end)
    checked: set[int] = set()
    found: set[int] = set()
    for hit in [h for literal in _FAILURE_HINTS for h in _positions(text, literal, start, end)] + messages:
        line_start = _line_start(text, start, hit)
        if line_start in checked:
            continue
        checked.add(line_start)
        line_end = text.find("\n", hit, end)
        if _is_failure_line(text[line_start : line_end if line_end >= 0 else end]):
            found.add(line_start)
    into = found if frames is None else frames
    into.update(_line_start(text, start, hit) for hit in frame_hits)
    return found


def _error_stamps(text: str, start: int, end: int) -> tuple[list[int], list[int]]:
    """vLLM's `ERROR ` stamps in `text[start:end]`: (those before a message, those before a startup
    logger's traceback frame); indented source lines and traceback headers are neither."""
    messages: list[int] = []
    frames: list[int] = []
    for hit in _positions(text, "ERROR ", start, end):
        m = _ERROR_AT.match(text, hit)
        if m is not None and not m.group("skip"):
            (frames if m.group("frame") else messages).append(hit)
    return messages, frames


def _is_failure_line(line: str) -> bool:
    """A failure rule or an engine death matches the line (found by a cheap trigger first)."""
    if _SOURCE_LINE.search(line):
        return False  # a traceback's source line, `  File "..."` or indented code: never a cause
    return any(t in line for t in _TRIGGERS) and bool(failure.SCAN.search(line) or ENGINE_DIED.search(line))


def top_alternatives(pattern: str) -> list[str]:
    """`a|b(?:c|d)|e` -> ['a', 'b(?:c|d)', 'e']."""
    out, depth, current, i = [], 0, "", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            current += pattern[i : i + 2]
            i += 2
            continue
        depth += (ch == "(") - (ch == ")")
        if ch == "|" and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
        i += 1
    return [*out, current]


def longest_literal(alternative: str) -> str:
    """The longest run of text every match of this regex alternative contains (a quantified last
    character is not part of it: `models?` -> `model`)."""
    best, current, i = "", "", 0
    while i < len(alternative):
        ch = alternative[i]
        if ch == "\\":
            escaped = alternative[i + 1]
            if escaped.isalnum():  # \d, \w, \s: a class, not a literal
                best, current = max(best, current, key=len), ""
            else:
                current += escaped
            i += 2
            continue
        if ch in "?*{":
            current = current[:-1]
            i = alternative.index("}", i) if ch == "{" else i
        if ch in "?*{+()[]|.^$":
            best, current = max(best, current, key=len), ""
            i = alternative.index("]", i) if ch == "[" else i + 2 if alternative[i : i + 3] == "(?:" else i
        else:
            current += ch
        i += 1
    return max(best, current, key=len)


# A cheap `in` test per hint line before the rules' regexes run on it (~85 µs a line otherwise).
_TRIGGERS = tuple(
    sorted({longest_literal(a) for rx in (failure.SCAN, ENGINE_DIED) for a in top_alternatives(rx.pattern)})
)


def banner_candidates(text: str, start: int, end: int) -> list[int]:
    """Line starts in `text[start:end]` that may hold a version banner (the caller confirms)."""
    return sorted({_line_start(text, start, h) for h in _positions(text, _BANNER_LITERAL, start, end)})


def outcome_lines(text: str, start: int, end: int) -> tuple[list[int], list[int]]:
    """Line starts in `text[start:end]` that can decide a startup's outcome, and the traceback frames
    of startup loggers, which decide it only in a startup that shows nothing else (an excerpt)."""
    hits = [h for literal in _OUTCOME_LITERALS for h in _positions(text, literal, start, end)]
    frames: set[int] = set()
    found = failure_lines(text, start, end, frames)
    return sorted({_line_start(text, start, h) for h in hits} | found), sorted(frames)


def _line_start(text: str, floor: int, pos: int) -> int:
    return max(floor, text.rfind("\n", floor, pos) + 1)


def _positions(text: str, literal: str, start: int, end: int) -> list[int]:
    found = []
    i = text.find(literal, start, end)
    while i >= 0:
        found.append(i)
        i = text.find(literal, i + len(literal), end)
    return found
