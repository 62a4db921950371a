"""What each message the parser reads does to the startup's facts (needle → handler).

Handlers are plain functions of the collector, seen as `CollectorView`: the handlers declare what
they touch and `collector.Collector` satisfies it, so the collector imports its dispatch table and
nothing here imports the collector back. `DISPATCH` pairs each handler with a cheap substring test
so a record runs only the regexes that can match it. Patterns live in `patterns.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from launcher.logfacts import configline
from launcher.logfacts import patterns as p
from launcher.logfacts.events import EventKind
from launcher.logfacts.history import History
from launcher.logfacts.lines import Record
from launcher.logfacts.markers import MarkerSet
from launcher.logfacts.pyrepr import parse_dict, parse_namespace
from launcher.logfacts.startup import ASKED, COMMAND, STATED, Startup


class CollectorView(Protocol):
    """What a handler reads and writes of the collector: the startup it fills, the summaries of the
    startups before it, the last echoed command line, and the events it emits."""

    markers: MarkerSet
    startup: Startup
    startups_seen: int
    history: History
    command: dict[str, Any]

    def emit(self, kind: EventKind, rec: Record, line_no: int, **detail: Any) -> None: ...

    def once(self, kind: EventKind, rec: Record, line_no: int, **detail: Any) -> None: ...

    def set_all(self, values: dict[str, Any], rank: int) -> None: ...


Handler = Callable[[CollectorView, Record, int], None]


def banner(rec: Record) -> re.Match[str] | None:
    """The version banner a startup begins with: 0.33's, the older API server's, or the logo's."""
    m = p.VERSION_SERVER.match(rec.msg) or p.VERSION_API.match(rec.msg)
    if m is None and any(g in rec.msg for g in p.LOGO_GLYPHS):
        m = p.VERSION_LOGO.search(rec.msg)
    return m


def version(c: CollectorView, rec: Record, line_no: int) -> None:
    m = banner(rec)
    if m is None:
        return
    if c.startup.activity:
        summary = c.startup.summary()
        if summary is not None:
            c.history.add(summary)
        c.startup = Startup(c.markers.patterns)
        c.set_all(c.command, COMMAND)  # the echoed command line came before this banner
    c.startups_seen += 1
    c.startup.set("vllm_version", m.group("version"), STATED)
    c.startup.banner_ts = c.startup.banner_ts or rec.ts
    c.startup.stamps.mark("first", rec.ts)  # a log that begins later (an excerpt) has no timeline
    if c.startup.banner_line_no is None:
        c.startup.banner_line_no = line_no
    if "model" in m.groupdict():
        c.startup.set("model", m.group("model"), STATED)
    c.emit(EventKind.BANNER, rec, line_no, version=m.group("version"), startup=c.startups_seen)


def logo_model(c: CollectorView, rec: Record, line_no: int) -> None:
    if not any(g in rec.msg for g in p.LOGO_GLYPHS):
        return
    m = p.MODEL_LOGO.search(rec.msg)
    if m is not None:
        c.startup.set("model", m.group("model"), STATED)


def args(c: CollectorView, rec: Record, line_no: int) -> None:
    m = p.NON_DEFAULT_ARGS.match(rec.msg)
    if m is not None:
        parsed = parse_dict(m.group("args"))
        if parsed is not None:
            c.startup.non_default_args = configline.redact(parsed)
    else:
        m = p.NAMESPACE_ARGS.match(rec.msg)
        parsed = parse_namespace(m.group("args")) if m else None
    if parsed is not None:
        c.set_all(configline.from_args(parsed), ASKED)
        c.startup.activity = True


def engine_config(c: CollectorView, rec: Record, line_no: int) -> None:
    m = p.ENGINE_CONFIG.match(rec.msg)
    if m is None:
        return
    s = c.startup
    if m.group("version"):
        s.set("vllm_version", m.group("version"), COMMAND)  # only if no banner said it
    s.v1_engine = " V1 LLM engine" in rec.msg
    values = configline.from_engine_config(m.group("cfg"))
    c.set_all(values, STATED)
    keys = ("tensor_parallel_size", "enforce_eager", "cudagraph_mode")
    detail: dict[str, Any] = {k: values[k] for k in keys if k in values}
    if "capture_sizes" in values:
        detail["capture_sizes"] = len(values["capture_sizes"])
    c.once(EventKind.ENGINE_CONFIGURED, rec, line_no, **detail)


def simple(c: CollectorView, rec: Record, line_no: int) -> None:
    """Single-value lines: max model len, chunked prefill, runner choice, eager, compile, skip."""
    msg, s = rec.msg, c.startup
    if m := p.MAX_MODEL_LEN.match(msg):
        s.set("max_model_len", int(m.group("n")), STATED)
    elif m := p.CHUNKED_PREFILL.match(msg):
        s.set("max_num_batched_tokens", int(m.group("n")), STATED)
    elif p.RUNNER_V2.match(msg):
        s.set("model_runner", "v2", STATED)
    elif p.RUNNER_V1_FALLBACK.match(msg):
        s.set("model_runner", "v1", STATED)
    elif p.ENFORCE_EAGER.match(msg):
        s.set("enforce_eager", True, STATED)
    elif p.CAPTURE_START_V0.match(msg):
        s.infer("enforce_eager", False, rec.text, line_no)  # printed only when capturing (V0)
    elif p.CAPTURE_SKIPPED.match(msg):
        s.capture.skipped = True
        s.activity = True
    elif p.COMPILE_START.match(msg):
        c.once(EventKind.COMPILING, rec, line_no)
    elif m := p.COMPILE_TOTAL.match(msg):
        s.set("compile_seconds", float(m.group("secs")), ASKED)
        s.stamps.mark("compiled", rec.ts)


def compile_cache(c: CollectorView, rec: Record, line_no: int) -> None:
    """torch.compile's cache: its directory, and each graph compiled (a miss) or loaded (a hit)."""
    msg, stamps = rec.msg, c.startup.stamps
    if m := p.COMPILE_CACHE_DIR.match(msg):
        stamps.cache_dir = stamps.cache_dir or m.group("dir")
    elif p.COMPILE_MISS.match(msg):
        stamps.compiled_graphs += 1
    elif p.COMPILE_HIT.match(msg):
        stamps.loaded_graphs += 1


def loading(c: CollectorView, rec: Record, line_no: int) -> None:
    msg, s = rec.msg, c.startup
    if p.LOAD_START_V2.match(msg):
        s.set("model_runner", "v2", ASKED)
        s.stamps.mark("loading", rec.ts)
        c.once(EventKind.LOADING_WEIGHTS, rec, line_no)
    elif m := p.LOAD_START_V1.match(msg):
        s.set("model", m.group("model"), ASKED)
        if s.v1_engine:
            # the V2 runner says `Loading model from scratch` instead
            s.infer("model_runner", "v1", rec.text, line_no)
        s.stamps.mark("loading", rec.ts)
        c.once(EventKind.LOADING_WEIGHTS, rec, line_no)
    elif m := p.WEIGHTS_TOOK.match(msg):
        s.set("weights_load_seconds", float(m.group("secs")), STATED)
    elif m := (p.MODEL_LOADING.match(msg) or p.MODEL_WEIGHTS_OLD.match(msg)):
        s.weights_gib.append(float(m.group("gib")))
        s.stamps.mark("weights", rec.ts)
        c.once(EventKind.WEIGHTS_LOADED, rec, line_no, gib=float(m.group("gib")))


def profiling(c: CollectorView, rec: Record, line_no: int) -> None:
    msg, s = rec.msg, c.startup
    if m := p.CG_PROFILE_V1.match(msg):
        modes = p.CG_PROFILE_MODE.finditer(msg)
        s.capture.mode_counts = {x.group("mode"): int(x.group("n")) for x in modes}
        s.infer("model_runner", "v1", rec.text, line_no)  # only the V1 runner prints this profile
        s.infer("enforce_eager", False, rec.text, line_no)  # …and only when graphs will be captured
    elif m := p.KV_AVAILABLE.match(msg):
        s.kv_gib.append(float(m.group("gib")))
    elif not p.MEMORY_PROFILING_OLD.match(msg):
        return
    c.once(EventKind.PROFILING, rec, line_no)


def memory_summary(c: CollectorView, rec: Record, line_no: int) -> None:
    """V0's (and early V1's) three-line profile summary: the utilization, the weights, the KV share."""
    msg, s = rec.msg, c.startup
    if m := p.MEMORY_BUDGET_OLD.match(msg):
        s.set("gpu_memory_utilization", float(m.group("util")), STATED)
    if (m := p.MEMORY_WEIGHTS_OLD.match(msg)) and not s.weights_gib:
        s.weights_gib.append(float(m.group("gib")))  # rounded: only when no load line said it
    if m := p.MEMORY_KV_OLD.search(msg):
        s.kv_gib.append(float(m.group("gib")))
        c.once(EventKind.PROFILING, rec, line_no)


def kv(c: CollectorView, rec: Record, line_no: int) -> None:
    msg, s = rec.msg, c.startup
    one = p.KV_ONE_LINE.match(msg)
    size = one or p.KV_SIZE_ONLY.match(msg)
    conc = one or p.KV_CONCURRENCY.match(msg)
    blocks = p.GPU_BLOCKS.match(msg)
    if conc is not None:
        s.capture.kv_sized = True  # printed with the KV size: an excerpt may hold this line alone
    if size is not None:
        s.kv_tokens.append(p.to_int(size.group("tokens")))
    if conc is not None:
        s.concurrency.append((float(conc.group("conc")), p.to_int(conc.group("maxlen"))))
        s.set("max_model_len", p.to_int(conc.group("maxlen")), ASKED)
    if blocks is not None:
        s.gpu_blocks.append(int(blocks.group("blocks")))
    if size is not None or blocks is not None:
        s.capture.kv_sized = True
        s.stamps.mark("kv", rec.ts)
        detail: dict[str, Any] = {"proc": rec.label}
        detail["tokens" if size else "gpu_blocks"] = s.kv_tokens[-1] if size else s.gpu_blocks[-1]
        if one is not None:
            detail["concurrency"] = float(one.group("conc"))
            detail["max_model_len"] = p.to_int(one.group("maxlen"))
        c.emit(EventKind.KV_CACHE_SIZED, rec, line_no, **detail)


def graphs_done(c: CollectorView, rec: Record, line_no: int) -> None:
    m = p.GRAPH_DONE.match(rec.msg)
    if m is None:
        return
    gib = float(m.group("gib")) if m.group("gib") else None
    c.startup.infer("enforce_eager", False, rec.text, line_no)  # graphs were captured
    if c.startup.capture.on_done(float(m.group("secs")), gib, rec.text):
        c.startup.stamps.mark("graphs", rec.ts)
        c.emit(EventKind.GRAPHS_CAPTURED, rec, line_no, secs=float(m.group("secs")), gib=gib)


def init_engine(c: CollectorView, rec: Record, line_no: int) -> None:
    m = p.INIT_ENGINE.match(rec.msg)
    if m is None:
        return
    s = c.startup
    s.set("engine_init_seconds", float(m.group("secs")), STATED)
    if m.group("comp"):
        s.set("compile_seconds", float(m.group("comp")), STATED)
    s.capture.engine_initialized = True
    s.init_ts = rec.ts
    s.stamps.mark("engine", rec.ts)
    c.once(EventKind.ENGINE_INITIALIZED, rec, line_no, secs=float(m.group("secs")))


def serving(c: CollectorView, rec: Record, line_no: int) -> None:
    msg, s = rec.msg, c.startup
    m = p.SERVER_START.match(msg) or p.UVICORN_RUNNING.match(msg)
    if m is not None:
        port = p.port_of(m.group("url")) or p.port_of(msg)
        s.set("served_url", m.group("url") if "://" in m.group("url") else msg, STATED)
        if port is not None:
            s.set("served_port", port, STATED)
        ts = rec.ts or s.stamps.last  # uvicorn's `Uvicorn running on` has no stamp (≤ 0.6): the line before
        s.serving_ts = s.serving_ts or ts
        s.stamps.mark("serving", ts)
        c.once(EventKind.SERVER_STARTING, rec, line_no, url=m.group("url"))
    elif p.READY.match(msg) and rec.level in (None, "INFO") and s.outcome != "ready":
        s.outcome, s.failure = "ready", None
        c.emit(EventKind.READY, rec, line_no)
    elif p.SHUTDOWN.match(msg):
        s.shutdown_seen = True
        c.once(EventKind.SHUTDOWN, rec, line_no)


def command(c: CollectorView, rec: Record, line_no: int) -> None:
    if rec.level is not None or rec.msg.startswith("usage:"):
        return
    m = p.COMMAND_LINE.search(rec.msg)
    if m is not None:
        c.command = configline.from_command(m.group("args"))
        c.set_all(c.command, COMMAND)


def kv_error(c: CollectorView, rec: Record, line_no: int) -> None:
    """The KV-capacity error states the model's max length (`… max seq len (131072) …`)."""
    m = p.KV_ERROR_MAX_LEN.search(rec.msg)
    if m is not None:
        c.startup.set("max_model_len", int(m.group("n")), ASKED)


DISPATCH: tuple[tuple[str, Handler], ...] = (
    ("version", version),
    ("model", logo_model),
    ("args: ", args),
    ("LLM engine", engine_config),
    ("Using ", simple),
    ("Chunked prefill", simple),
    ("Model Runner", simple),
    ("eager", simple),
    ("Skipping ", simple),
    ("Capturing ", simple),
    ("torch.compile", simple),
    ("Using cache directory", compile_cache),
    ("Compiling a graph", compile_cache),
    ("Directly load the compiled", compile_cache),
    ("oad", loading),  # Loading…, Starting to load…, Model loading took
    ("Profiling CUDA graph", profiling),
    ("Available KV cache memory", profiling),
    ("Memory profiling", profiling),
    ("KV cache size", kv),
    ("Maximum concurrency", kv),
    (" blocks: ", kv),
    ("the current vLLM instance", memory_summary),
    ("model weights take", memory_summary),
    ("max seq len (", kv_error),
    ("Graph capturing finished", graphs_done),
    ("init engine", init_engine),
    ("server", serving),
    ("Uvicorn running", serving),
    ("Application startup complete", serving),
    ("Shutting down", serving),
    ("shutdown", serving),
    ("vllm", command),
)
