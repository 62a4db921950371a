"""Log facts: what a vLLM log proves the server did, as typed facts and a stream of events.

The gates judge what vLLM *did*, not what the profile asked for; this package is their eyes.
One parser serves both uses, so a file is parsed exactly as a live log would be:

    stream = LogStream(markers=["IQ4XS_BMMVQ_READY"])
    for chunk in pipe:                       # bytes or str, split anywhere (mid-line, mid-UTF-8)
        for event in stream.feed(chunk):     # LogEvent(kind, line, line_no, detail)
            react(event.kind, event.line)    # EventKind.CAPTURING_GRAPHS detail: desc, n, total
    stream.close()                           # flushes the last line without a newline
    stream.facts                             # LogFacts snapshot, any time; .to_json() for JSON

    facts, events = parse_file("vllm.log")   # "-" = stdin; UnreadableLog (exit 2) if unreadable
    facts, _ = parse_file("vllm.log", events=False)  # facts only: superseded startups skimmed (fast)
    facts, events = parse_text(text)

Events (`EventKind`), in the order a healthy startup shows them: banner, engine_configured,
loading_weights, weights_loaded, compiling, profiling, kv_cache_sized, capturing_graphs (i/N,
final capture only), graphs_captured, engine_initialized, server_starting, ready; or failed
(again only when a more specific cause appears); then engine_died / shutdown; marker_seen any
time. A second version banner starts a new startup: facts then describe the latest one, and
`facts.startups` / `facts.startup_outcomes` tell every startup's outcome (a restart loop). Failure
kinds and the phrasings of each vLLM release: launcher/data/log_catalogue.json (docs/logs.md).

Every fact and the lines it is read from: docs/logs.md. The parser never imports vLLM nor the
simulator (vllm_sim), and never infers a fact from vLLM's defaults.
"""

from __future__ import annotations

from launcher.logfacts.events import EventKind, LogEvent
from launcher.logfacts.facts import LogFacts
from launcher.logfacts.logfile import UnreadableLog, parse_binary, parse_file
from launcher.logfacts.markers import BadMarker
from launcher.logfacts.stream import LogStream, parse_text

__all__ = [
    "BadMarker",
    "EventKind",
    "LogEvent",
    "LogFacts",
    "LogStream",
    "UnreadableLog",
    "parse_binary",
    "parse_file",
    "parse_text",
]
