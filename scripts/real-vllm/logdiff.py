"""Two vLLM logs compared line by line: the parser's events and facts, named lines, sources, content.

Used by `fidelity.py` (the real vLLM 0.26.0 against the simulator) and its test. Both logs must be
split into lines the way the launcher records them (`\\r`, `\\r\\n`, `\\n`). A row is one check: the
real log's value, the simulator's, and whether they differ (`DIFF`), agree (`same`), or differ in a
way that depends on the machine (`host`: the fd-limit warning).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from launcher.logfacts.logfile import parse_file

READY = "Application startup complete."
FACTS_EQUAL = (
    "vllm_version",
    "capture_sizes",
    "graphs_captured_by_mode",
    "cudagraph_mode",
    "model_runner",
    "outcome",
)
FACTS_PRESENT = ("kv_cache_tokens", "max_concurrency", "kv_cache_gib")
HOST_DEPENDENT = ("fd limit",)
RECORD = re.compile(
    r"^\((?P<proc>\S+) pid=\d+\) (?P<level>[A-Z]+) \d\d-\d\d \d\d:\d\d:\d\d \[(?P<src>[^\]]+)\] ?(?P<msg>.*)$"
)
PREFIXED = re.compile(r"^\((?P<proc>\S+) pid=\d+\) ?(?P<msg>.*)$")
# (name, regex on the message, or on the text after the process prefix for non-record lines)
CATALOGUE: tuple[tuple[str, str], ...] = (
    ("banner", r"version \d+\.\d+\.\d+|^vLLM server version"),
    ("non-default args", r"^non-default args: "),
    ("fd limit", r"^Found ulimit of"),
    ("unknown env", r"^Unknown vLLM environment variable detected"),
    ("architecture", r"^Resolved architecture"),
    ("max model len", r"^Using max model len"),
    ("chunked prefill", r"^Chunked prefill is enabled"),
    ("async scheduling off", r"^Async scheduling not supported"),
    ("async scheduling", r"^Asynchronous scheduling is"),
    ("runner fallback", r"^Model Runner V2 does not yet support"),
    ("engine config", r"^Initializing a V1 LLM engine"),
    ("V2 runner", r"^Using V2 Model Runner"),
    ("load start", r"^(Loading model from scratch|Starting to load model)"),
    ("attention backend", r"^Using \w+ attention backend"),
    ("shard bar", r"^Loading safetensors checkpoint shards:"),
    ("weights loaded", r"^Loading weights took"),
    ("drafter", r"^Loading drafter model"),
    ("model loading took", r"^Model loading took"),
    ("torch.compile start", r"Starting torch\.compile"),
    ("compile cache dir", r"Using cache directory: "),
    ("compile range", r"Compiling a graph for compile range"),
    ("torch.compile total", r"torch\.compile took"),
    ("warm-up run", r"^Initial profiling/warmup run took"),
    ("graph memory profile", r"^Profiling CUDA graph memory"),
    ("graph memory estimate", r"^Estimated CUDA graph memory"),
    ("KV available", r"^Available KV cache memory"),
    ("profiler note", r"^CUDA graph memory profiling is enabled"),
    ("KV size", r"^GPU KV cache size"),
    ("concurrency", r"Maximum concurrency for"),
    ("JIT warm-up", r"^JIT kernel warmup"),
    ("PIECEWISE bar", r"^Capturing CUDA graphs \((mixed prefill-decode, )?PIECEWISE\)"),
    ("FULL bar", r"^Capturing CUDA graphs \((decode, )?FULL\)"),
    ("graphs captured", r"^Graph capturing finished"),
    ("graph pool", r"^CUDA graph pool memory"),
    ("memory summary", r"^Free memory on device .* Desired GPU memory"),
    ("init engine took", r"^init engine \(profile"),
    ("supported tasks", r"^Supported tasks"),
    ("auto tool choice", r'^"auto" tool choice has been enabled'),
    ("chat template format", r"^Detected the chat template content format"),
    ("server start", r"^Starting vLLM (API )?server"),
    ("routes", r"^Available routes are:"),
    ("route line", r"^Route: "),
    ("uvicorn started", r"^INFO:     Started server process"),
    ("uvicorn waiting", r"^INFO:     Waiting for application startup"),
    ("startup complete", r"^INFO:     Application startup complete"),
    ("access line", r'^INFO:     \S+:\d+ - "'),
    ("uvicorn shutting down", r"^INFO:     Shutting down"),
    ("shutdown complete", r"^INFO:     Application shutdown complete"),
    ("uvicorn finished", r"^INFO:     Finished server process"),
    ("tqdm prefix line", r"^$"),
)


@dataclass(frozen=True, slots=True)
class Line:
    no: int
    form: str  # "record" (full vLLM prefix) | "prefixed" (`(NAME pid=N) ` only) | "bare"
    proc: str
    level: str
    src: str
    msg: str

    @property
    def shape(self) -> str:
        return f"{self.form} {self.proc} {self.level} [{self.src}]".replace(" -", "").replace(" []", "")


@dataclass(frozen=True, slots=True)
class Row:
    section: str
    check: str
    real: str
    sim: str
    host: bool = False  # a difference that depends on the machine, not on the simulator

    @property
    def verdict(self) -> str:
        return "same" if self.real == self.sim else ("host" if self.host else "DIFF")


def classify(no: int, text: str) -> Line:
    if m := RECORD.match(text):
        return Line(no, "record", m["proc"], m["level"], m["src"], m["msg"])
    if m := PREFIXED.match(text):
        return Line(no, "prefixed", m["proc"], "-", "", m["msg"])
    return Line(no, "bare", "-", "-", "", text)


def checkpoints(lines: list[Line]) -> dict[str, Line]:
    """First line of each catalogue entry; shutdown lines each get their own entry."""
    found: dict[str, Line] = {}
    for line in lines:
        if "[shutdown]" in line.msg:
            found.setdefault("shutdown: " + re.sub(r"\d+", "N", line.msg.split("[shutdown] ", 1)[1]), line)
            continue
        for name, pattern in CATALOGUE:
            if name == "tqdm prefix line" and line.form != "prefixed":
                continue
            if re.search(pattern, line.msg):
                found.setdefault(name, line)
                break
    return found


def windows(lines: list[Line]) -> list[Line]:
    """Startup (to ready) and shutdown lines: what the simulator must reproduce without requests."""
    ready = next((i for i, x in enumerate(lines) if READY in x.msg), len(lines))
    stop = next((i for i, x in enumerate(lines) if "[shutdown]" in x.msg), len(lines))
    return lines[: ready + 1] + lines[stop:]


def top_keys(text: str) -> list[str]:
    """`a=1, b=X(c=2), d={'e': 3}` → [a, b, d]: the keys at nesting depth 0."""
    keys, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
        if ch == "," and depth == 0:
            keys.append(re.split(r"[=:]", text[start:i].strip(), maxsplit=1)[0].strip("'"))
            start = i + 1
    return keys


def inside(msg: str, after: str, open_: str, close: str) -> str:
    """The text between the first `open_` after `after` and the last `close` of the message."""
    rest = msg.split(after, 1)[1]
    if not open_ or open_ not in rest or close not in rest:
        return rest
    return rest[rest.index(open_) + 1 : rest.rindex(close)]


def content_rows(real: dict[str, Line], sim: dict[str, Line], logs: list[list[Line]]) -> list[Row]:
    """Checks on what a line says, where both sides must agree whatever the model and the GPU."""
    sides = list(zip(logs, (real, sim), strict=True))

    def banner(lines: list[Line], found: dict[str, Line]) -> str:
        at = found.get("banner")
        if at is None:
            return "absent"
        near = [x.msg for x in lines if (x.src, x.proc) == (at.src, at.proc) and abs(x.no - at.no) <= 3]
        return " | ".join(re.sub(r"(version|model)\s+\S+", r"\1 X", m) for m in near)

    def keys(found: dict[str, Line], name: str, after: str, open_: str, close: str, ordered: bool) -> str:
        line = found.get(name)
        listed = top_keys(inside(line.msg, after, open_, close)) if line and after in line.msg else []
        return ", ".join(listed if ordered else sorted(listed)) or "absent"

    def message(found: dict[str, Line], name: str) -> str:
        line = found.get(name)
        return line.msg if line else "absent"

    def prefix_lines(lines: list[Line], found: dict[str, Line]) -> str:
        return str(sum(x.form == "prefixed" and not x.msg for x in lines))

    checks = {
        "banner lines": banner,
        "non-default args (key set)": lambda _, f: keys(
            f, "non-default args", "non-default args: ", "{", "}", False
        ),
        "engine config keys": lambda _, f: keys(f, "engine config", "with config: ", "", "", True),
        "compilation_config keys": lambda _, f: keys(
            f, "engine config", "compilation_config=", "{", "}, kernel_config", True
        ),
        "graph memory profile": lambda _, f: message(f, "graph memory profile"),
        "tqdm prefix lines": prefix_lines,
    }
    rows = []
    for check, read in checks.items():
        (real_value, sim_value) = (read(lines, found) for lines, found in sides)
        rows.append(Row("content", check, real_value, sim_value))
    return rows


def compare(real_path: Path, sim_path: Path) -> list[Row]:
    rows: list[Row] = []
    logs = []
    for path in (real_path, sim_path):
        facts, events = parse_file(path)
        kinds: list[str] = []
        for event in events:
            if not kinds or kinds[-1] != event.kind:
                kinds.append(str(event.kind))
        text = path.read_bytes().decode("utf-8", "replace").splitlines()
        logs.append((facts.to_json(), kinds, [classify(i + 1, t) for i, t in enumerate(text)]))
    (rf, rk, rl), (sf, sk, sl) = logs
    matcher = difflib.SequenceMatcher(a=rk, b=sk, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        rows.append(Row("events", f"{op} at {i1}", " ".join(rk[i1:i2]), " ".join(sk[j1:j2])))
    for key in FACTS_EQUAL:
        rows.append(Row("facts", key, str(rf.get(key)), str(sf.get(key))))
    for key in FACTS_PRESENT:
        rows.append(
            Row("facts", f"{key} present", str(rf.get(key) is not None), str(sf.get(key) is not None))
        )
    real, sim = checkpoints(rl), checkpoints(sl)
    for name in [*real, *(n for n in sim if n not in real)]:
        r, s = real.get(name), sim.get(name)
        rows.append(
            Row(
                "lines",
                name,
                r.shape if r else "absent",
                s.shape if s else "absent",
                host=name in HOST_DEPENDENT,
            )
        )
    for proc in sorted({x.proc for x in [*real.values(), *sim.values()]} - {"-"}):
        order = [
            [
                n
                for n, x in sorted(side.items(), key=lambda kv: kv[1].no)
                if x.proc == proc and n in real and n in sim
            ]
            for side in (real, sim)
        ]
        rows.append(Row("order", proc, " > ".join(order[0]), " > ".join(order[1])))
    sources = [
        {f"{x.proc} {x.level} [{x.src}]" for x in windows(lines) if x.form == "record"} for lines in (rl, sl)
    ]
    for key in sorted(sources[0] ^ sources[1]):
        host = "system_utils.py" in key
        rows.append(
            Row(
                "sources",
                key,
                "present" if key in sources[0] else "absent",
                "present" if key in sources[1] else "absent",
                host=host,
            )
        )
    return rows + content_rows(real, sim, [rl, sl])


def table(rows: list[Row], show_all: bool) -> str:
    shown = [r for r in rows if show_all or r.verdict != "same"]
    width = max([len(f"{r.section}: {r.check}") for r in shown] + [10])
    out = [f"{'check':<{width}}  verdict  real  |  sim"]
    for r in shown:
        out.append(f"{f'{r.section}: {r.check}':<{width}}  {r.verdict:<7}  {r.real}  |  {r.sim}")
    diffs = sum(r.verdict == "DIFF" for r in rows)
    out.append(
        f"{len(rows)} checks: {diffs} differ, {sum(r.verdict == 'host' for r in rows)} depend on the host"
    )
    return "\n".join(out)
