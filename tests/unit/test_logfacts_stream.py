"""`LogStream`: one parser for live logs and files, whatever the chunking."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from launcher.logfacts import EventKind, LogEvent, LogFacts, LogStream, parse_file, parse_text

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
CASES = sorted(p.name[: -len(".log")] for p in LOGS.glob("*.log"))
MARKERS = ["IQ4XS_BMMVQ_READY"]


def _feed(chunks: list[bytes] | list[str]) -> tuple[LogFacts, list[LogEvent]]:
    stream = LogStream(MARKERS)
    events: list[LogEvent] = []
    for chunk in chunks:
        events += stream.feed(chunk)
    events += stream.close()
    return stream.facts, events


def _split(data: bytes, rng: random.Random, most: int) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, most)
        out.append(data[i : i + n])
        i += n
    return out


@pytest.mark.parametrize("name", CASES)
def test_same_facts_and_events_whatever_the_chunking(name: str) -> None:
    data = (LOGS / f"{name}.log").read_bytes()
    whole = _feed([data])
    assert whole == parse_file(LOGS / f"{name}.log", MARKERS, chunk_bytes=7)
    assert _feed(data.splitlines(keepends=True)) == whole
    rng = random.Random(name)
    for most in (3, 64, 4096):  # bytes: splits fall inside UTF-8 sequences, `\r\n` pairs and ANSI codes
        assert _feed(_split(data, rng, most)) == whole
    text = data.decode("utf-8")
    assert _feed([text[i : i + 17] for i in range(0, len(text), 17)]) == whole


def test_event_sequence_of_a_full_startup() -> None:
    _, events = parse_file(LOGS / "v033_tp1_ready.log")
    kinds: list[str] = []
    for event in events:
        if not kinds or kinds[-1] != event.kind:
            kinds.append(event.kind)
    assert kinds == [
        EventKind.BANNER,
        EventKind.ENGINE_CONFIGURED,
        EventKind.LOADING_WEIGHTS,
        EventKind.WEIGHTS_LOADED,
        EventKind.COMPILING,
        EventKind.PROFILING,
        EventKind.KV_CACHE_SIZED,
        EventKind.CAPTURING_GRAPHS,
        EventKind.GRAPHS_CAPTURED,
        EventKind.ENGINE_INITIALIZED,
        EventKind.SERVER_STARTING,
        EventKind.READY,
        EventKind.SHUTDOWN,
    ]
    capture = [e for e in events if e.kind == EventKind.CAPTURING_GRAPHS]
    assert capture[-1].detail == {"desc": "Capturing CUDA graphs (FULL)", "n": 51, "total": 51}
    kv = next(e for e in events if e.kind == EventKind.KV_CACHE_SIZED)
    assert "GPU KV cache size: 789,184 tokens" in kv.line and kv.detail["tokens"] == 789184
    ready = next(e for e in events if e.kind == EventKind.READY)
    assert ready.line == "INFO:     Application startup complete."
    lines = (LOGS / "v033_tp1_ready.log").read_bytes().decode("utf-8").split("\n")
    assert lines[ready.line_no - 1] == ready.line


def test_capture_progress_arrives_before_the_bar_ends() -> None:
    """A live tqdm bar has no newline until it closes: each finished `\\r` redraw is an event."""
    stream = LogStream()
    stream.feed(
        "(EngineCore pid=1) INFO 11-29 06:26:59 [kv_cache_utils.py:1147] GPU KV cache size: "
        "1,000 tokens, Maximum concurrency for 100 tokens per request: 10.00x\n"
    )
    seen = []
    for i in range(4):
        seen += stream.feed(f"\rCapturing CUDA graphs (FULL): {i * 25:3d}%|##   | {i}/4 [00:01<00:01]")
    progress = [(e.detail["n"], e.line_no) for e in seen if e.kind == EventKind.CAPTURING_GRAPHS]
    assert progress == [(0, 2), (1, 2), (2, 2)]  # the redraw still being written is not read yet
    tail = stream.feed("\rCapturing CUDA graphs (FULL): 100%|#####| 4/4 [00:02<00:00]\n")
    assert [e.detail["n"] for e in tail] == [3, 4]
    assert stream.facts.graphs_captured == 4


def test_close_reads_a_last_line_without_newline_and_rejects_more() -> None:
    stream = LogStream()
    assert stream.feed(b"INFO:     Application startup complete.") == []
    assert [e.kind for e in stream.close()] == [EventKind.READY]
    assert stream.facts.outcome == "ready" and stream.facts.lines_read == 1
    with pytest.raises(ValueError):
        stream.feed("more")


def test_a_wrapped_record_waits_for_its_continuation() -> None:
    stream = LogStream()
    head = "(EngineCore pid=7) INFO 11-29 06:26:59 [kv_cache_utils.py:1147] GPU KV cache size: 1,578,8"
    assert stream.feed(head + "\n") == []
    assert stream.feed("00 tokens, Maximum concurrency for 131,072 tokens per request: 12.0") == []
    events = stream.feed("5x\nINFO:     Started server process [7]\n")
    assert [(e.kind, e.line_no) for e in events] == [(EventKind.KV_CACHE_SIZED, 1)]
    assert stream.facts.kv_cache_tokens == 1578800
    assert stream.facts.max_concurrency is not None and stream.facts.max_concurrency.value == 12.05


def test_a_new_banner_starts_a_new_startup() -> None:
    failed = (LOGS / "fail_port_in_use.log").read_text(encoding="utf-8")
    ready = (LOGS / "v033_tp1_ready.log").read_text(encoding="utf-8")
    facts, events = parse_text(failed + ready)
    assert facts.startups_seen == 2 and facts.outcome == "ready" and facts.failure_kind is None
    assert [e.detail["startup"] for e in events if e.kind == EventKind.BANNER] == [1, 2]
    assert [e.detail["cause"] for e in events if e.kind == EventKind.FAILED] == ["port_in_use"]


def test_process_exit_is_the_weakest_failure_and_a_death_after_ready() -> None:
    lines = (LOGS / "docker_compose_v033.log").read_bytes().decode("utf-8").split("\n")
    cut = next(i for i, line in enumerate(lines) if "init engine" in line)
    facts, _ = parse_text("\n".join([*lines[:cut], "vllm-1 exited with code 137", ""]))
    assert (facts.outcome, facts.failure_kind) == ("failed", "other")
    assert facts.failure_line == "vllm-1 exited with code 137"
    facts, events = parse_text("\n".join([*lines, "vllm-1 exited with code 137", ""]))
    assert facts.outcome == "ready" and facts.died_after_ready is not None
    assert events[-1].kind == EventKind.ENGINE_DIED
    stopped = (
        "vllm-1  | INFO:     Shutting down\nvllm-1  | INFO:     Application shutdown complete.\n"
        "vllm-1 exited with code 143\n"
    )
    facts, _ = parse_text("\n".join(lines) + "\n" + stopped)
    assert facts.outcome == "ready" and facts.died_after_ready is None and facts.shutdown_seen


def test_a_request_error_after_readiness_is_not_a_death() -> None:
    ready = (LOGS / "v033_tp1_ready.log").read_bytes().decode("utf-8")
    head = "(APIServer pid=4101) ERROR 11-29 07:00:01 [serving.py:312] "
    request_error = (
        "\r\n".join(
            head + part
            for part in (
                "Error in preprocessing prompt inputs",
                "Traceback (most recent call last):",
                '  File "/x/serving.py", line 300, in f',
                "ValueError: This model's maximum context length is 40960 tokens; you requested 50000 tokens.",
            )
        )
        + "\n"
    )
    facts, _ = parse_text(ready + request_error)
    assert facts.outcome == "ready" and facts.died_after_ready is None
