"""Raw log text → clean records: what a line says once the noise around vLLM's own text is gone.

Noise seen in real logs (vllm-facts.md §1, public issue pastes):
- ANSI colours, real (`\\x1b[32m`) or pasted literally (`^[[0;36m`); 0.33's ColoredFormatter
  colours the level and greys the timestamp, older `_add_prefix` coloured `(NAME pid=N)` cyan;
- outer prefixes: docker-compose `vllm-1  | `, journald `Nov 29 06:25:47 host vllm[123]: ` (or
  short-iso, or a month in another locale: `авг 18 …`), bare ISO timestamps (`docker logs -t`, CI),
  a wrapper's Python logging (`2025-11-12 20:41:49,503 - INFO - `), torch's `[rank0]: `, a Markdown
  quote `> `, Ray's `(RayWorkerProc pid=N, ip=…) `;
- tqdm redraws separated by `\\r`, and multi-line vLLM messages joined with `\\r\\n`: a physical
  line is split into `\\r` segments, each parsed on its own;
- vLLM's prefix, optional in every part (vllm-facts.md §1 tolerant prefix): `(EngineCore pid=4312) `,
  `(VllmWorker rank=3 pid=…) `, old `INFO 12-20 20:25:46 worker.py:241] msg`, new `[file.py:N]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.logfacts.patterns import BAR, RAY_REPEATED

_ANSI_REAL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ANSI_LITERAL = re.compile(r"\^\[\[[0-9;?]*[A-Za-z]")

# Logs pasted through a web page arrive HTML-escaped (`&#39;`, `&quot;`, `&lt;CUDAGraphMode…&gt;`).
# Only these five are undone: `html.unescape` would also turn `&#10;` into a newline and move lines.
HTML_ENTITY = re.compile(r"&(?:#39|#x27|quot|lt|gt|amp);")
_ENTITIES = {"&#39;": "'", "&#x27;": "'", "&quot;": '"', "&lt;": "<", "&gt;": ">", "&amp;": "&"}

_OUTER_PREFIXES = (
    # journald short: `Nov 29 06:25:47 gpu01 vllm[4101]: `, any locale's month (`авг 18 14:15:04 …`)
    re.compile(r"[^\W\d_]{3,5}\.? [ \d]\d \d\d:\d\d:\d\d \S+ [^\s\[:]+(?:\[\d+\])?: "),
    # a wrapper's Python logging in front of vLLM's line: `2025-11-12 20:41:49,503 - INFO - `
    re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)? - [A-Z]+ - "),
    # journald short-iso / bare ISO timestamps (`docker logs -t`, CI runners, `[2026-02-24T20:21:58Z]`)
    re.compile(
        r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"
        r"(?: \S+ [^\s\[:]+(?:\[\d+\])?:)? "
    ),
    # docker-compose: `vllm-1  | `, `vllm_1    | `
    re.compile(r"[A-Za-z0-9][\w.-]*\s*\| ?"),
    # torch's per-rank stderr `[rank0]: `; a Markdown quote `> ` of a pasted line
    re.compile(r"\[rank\d+\]: |> "),
)

# vllm-facts.md §1 tolerant prefix, widened for `(VllmWorker rank=3 pid=N)`, Ray's `, ip=…`, the old form
# without brackets around `file:line`, and milliseconds some forks add.
VLLM_PREFIX = re.compile(
    r"(?:\((?P<proc>[^()]*?) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? "
    r"\[?(?P<src>[^\]\s]+):(?P<lineno>\d+)\] ?"
)
# A paste that lost the level's first letters (`O 04-11 12:37:49 [llm_engine.py:242] `): the rest of
# vLLM's prefix is still there; the level is the one the fragment ends (`O` -> INFO), else unknown.
_CUT_LEVEL_PREFIX = re.compile(
    r"(?P<frag>[A-Z]{0,7}) ?(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? "
    r"\[(?P<src>[^\]\s]+):(?P<lineno>\d+)\] ?"
)
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
UNKNOWN_LEVEL = "?"
_BARE_PROC = re.compile(r"(?:\((?P<proc>[^()]*?) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\) )+")
_UVICORN = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)\b(?::|$)")
_RECORD_STARTS = (
    "Traceback (most recent call last)",
    "  File ",
    "During handling of the above exception",
    "The above exception was the direct cause",
    "Process ",
    "usage: ",
    "vllm: error",
)
_TAG_START = re.compile(r"\[[\w .:/=-]+\]|[IWEF]\d{4} \d\d:\d\d|\S+:\d+:\d+ \[\d+\] NCCL")


@dataclass(frozen=True, slots=True)
class Record:
    """One `\\r` segment: its clean text, its message, and vLLM's prefix fields when present."""

    text: str
    msg: str
    proc: str | None = None
    pid: int | None = None
    level: str | None = None
    ts: str | None = None
    src: str | None = None  # the file that logged it (`core.py`), from `[core.py:1111]`

    @property
    def label(self) -> str | None:
        """Which process wrote it, e.g. `Worker_TP1` or `VllmWorker rank=3`; None when unprefixed."""
        return self.proc if self.proc is not None else (f"pid={self.pid}" if self.pid else None)


def strip_ansi(text: str) -> str:
    """Remove colour codes; both checks are plain substring scans, so plain logs cost nothing."""
    if "\x1b" in text:
        text = _ANSI_REAL.sub("", text).replace("\x1b", "")
    if "^" in text and "^[[" in text:  # `^` alone is a fast scan; `^[[` only where carets exist
        text = _ANSI_LITERAL.sub("", text)
    return text


def unescape_html(text: str) -> str:
    return HTML_ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)


# A paste that lost its newlines glues records together: `…(response)(APIServer pid=2960)   File …`,
# `… [multiproc_executor.py:597] self.all_reduce(data) ERROR 11-04 18:02:56 [multiproc_executor.py:597] …`.
# A record starts again at each later prefix (bare process tag, or level and timestamp).
_GLUED = re.compile(
    r"(?<=\S)(?=\([^()]*? pid=\d+(?:, ip=[^)]*)?\) )"
    r"|(?<=\S)(?= (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[)"
)
_TAG_BEFORE = re.compile(r"\([^()]*? pid=\d+(?:, ip=[^)]*)?\)$")  # a level right after its process tag


def unglue(segment: str) -> list[str]:
    """The records of one segment whose newlines were lost; most segments are one record (cheap tests)."""
    if segment.count(" pid=") < 2 and segment.count("] ") < 2:
        return [segment]
    cuts = [m.start() for m in _GLUED.finditer(segment) if not _TAG_BEFORE.search(segment, 0, m.start())]
    if not cuts:
        return [segment]
    bounds = [0, *cuts, len(segment)]
    pieces = (
        segment[a:b].lstrip(" ") if a else segment[a:b] for a, b in zip(bounds, bounds[1:], strict=False)
    )
    return [piece for piece in pieces if piece]


def strip_outer(line: str) -> str:
    """Drop journald/docker/timestamp prefixes (nested ones too, e.g. journald around docker)."""
    for _ in range(4):
        for rx in _OUTER_PREFIXES:
            m = rx.match(line)
            if m and m.end() < len(line):
                line = line[m.end() :]
                break
        else:
            return line
    return line


def parse_segment(text: str) -> Record:
    """Split a clean segment into vLLM's prefix fields and the message (vllm-facts.md §1)."""
    m = VLLM_PREFIX.search(text)
    if m is not None:
        msg = RAY_REPEATED.sub("", text[m.end() :]).rstrip()
        pid = m.group("pid")
        fields = m.group("level", "ts", "src")
        return Record(text, msg, m.group("proc"), int(pid) if pid else None, *fields)
    cut = _CUT_LEVEL_PREFIX.match(text)
    if cut is not None:
        msg = RAY_REPEATED.sub("", text[cut.end() :]).rstrip()
        return Record(text, msg, None, None, _level_of(cut.group("frag")), cut.group("ts"), cut.group("src"))
    proc: str | None = None
    pid_text: str | None = None
    rest = text
    bare = _BARE_PROC.match(text)
    if bare is not None:  # older `_add_prefix`: stderr, uvicorn and tracebacks got `(NAME pid=N) `
        proc, pid_text, rest = bare.group("proc"), bare.group("pid"), text[bare.end() :]
    level: str | None = None
    uv = _UVICORN.match(rest)
    if uv is not None:
        level, rest = uv.group("level"), rest[uv.end() :]
    msg = RAY_REPEATED.sub("", rest).rstrip()
    return Record(text, msg, proc, int(pid_text) if pid_text else None, level, None)


def _level_of(fragment: str) -> str:
    """The level a cut fragment ends: `O` -> INFO, `ROR` -> ERROR; `G` (DEBUG or WARNING) -> unknown."""
    ends = [level for level in _LEVELS if fragment and level.endswith(fragment)]
    return ends[0] if len(ends) == 1 else UNKNOWN_LEVEL


def leading_proc(text: str) -> str | None:
    """The `(NAME pid=N) ` a segment starts with (older releases prefixed tqdm bars per rank)."""
    m = _BARE_PROC.match(text)
    return m.group("proc") if m else None


def is_record_like(line: str) -> bool:
    """Does this physical line start something new (so it cannot be a wrapped continuation)?"""
    line = strip_outer(line)
    if not line.strip() or line.startswith(("  ", "\t", "(")):
        return True  # one leading space is allowed: a terminal wrap can fall on the space of ", "
    if VLLM_PREFIX.search(line, 0, 400) or _UVICORN.match(line) or BAR.search(line):
        return True
    return line.startswith(_RECORD_STARTS) or bool(EXCEPTION_LINE.match(line) or _TAG_START.match(line))


def brackets_balanced(text: str) -> bool:
    """Rough completeness test for a wrapped dict/Namespace repr: quotes skipped, brackets counted."""
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth <= 0 and not quote
