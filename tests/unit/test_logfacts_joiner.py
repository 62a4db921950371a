"""Records cut by terminal wrapping, put back together (launcher/logfacts/joiner.py): which records wait
for continuation lines, which lines they take, and where they stop, on lines of the recorded 0.26.0
start (tests/data/real-vllm-0.26/tiny.log) cut as a terminal would cut them."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.logfacts import configline, parse_text
from launcher.logfacts.joiner import Pending, is_continued_command, needs_continuation
from launcher.logfacts.lines import parse_segment

TINY = (Path(__file__).resolve().parents[1] / "data" / "real-vllm-0.26" / "tiny.log").read_bytes()
LINES = TINY.decode("utf-8").split("\n")
KV_SIZE, KV_CONCURRENCY = LINES[40], LINES[41]  # two lines in 0.26.0
ENGINE_CONFIG = LINES[14]  # 3,908 characters: always wrapped on a terminal


def cut(line: str, width: int) -> list[str]:
    return [line[i : i + width] for i in range(0, len(line), width)]


def pending(first: str) -> Pending:
    return Pending(parse_segment(first), 1)


def test_the_recorded_lines_are_what_these_tests_cut() -> None:
    assert KV_SIZE.endswith("GPU KV cache size: 28,947,616 tokens")
    assert KV_CONCURRENCY.endswith("Maximum concurrency for 2,048 tokens per request: 14134.58x")
    assert (
        "Initializing a V1 LLM engine (v0.26.0) with config:" in ENGINE_CONFIG and len(ENGINE_CONFIG) > 3900
    )


@pytest.mark.parametrize(
    ("text", "waits"),
    [
        (KV_SIZE, False),
        (KV_SIZE[:-8], True),  # `… 28,947,6`: the count itself is cut
        (KV_CONCURRENCY, False),
        (KV_CONCURRENCY[:-1], True),  # `… 14134.58` without its `x`
        (KV_CONCURRENCY[:-4], True),
        (ENGINE_CONFIG, True),  # the config line takes every non-record line after it
        (LINES[2], False),  # the banner
    ],
)
def test_which_records_wait_for_a_continuation(text: str, waits: bool) -> None:
    assert needs_continuation(parse_segment(text)) is waits


def test_an_args_dict_waits_until_its_brackets_balance() -> None:
    head = (
        "(APIServer pid=1) INFO 11-30 10:00:01 [startup.py:96] non-default args: {'model': 'Qwen/Qwen3-32B', "
    )
    assert needs_continuation(parse_segment(head + "'port': 8100"))
    assert not needs_continuation(parse_segment(head + "'port': 8100}"))
    assert not needs_continuation(parse_segment(head + "'port': '}{', 'x': 1}"))  # brackets inside quotes


def test_an_echoed_command_continues_only_when_it_ends_with_a_backslash_and_has_no_log_prefix() -> None:
    assert is_continued_command(parse_segment("vllm serve Qwen/Qwen3-8B \\"))
    assert not is_continued_command(parse_segment("vllm serve Qwen/Qwen3-8B --port 8000"))
    logged = "(APIServer pid=1) INFO 11-30 10:00:01 [x.py:1] vllm serve m \\"
    assert not is_continued_command(parse_segment(logged))  # a record that quotes a command is no command


def test_a_cut_kv_line_takes_its_tail_and_is_read_whole() -> None:
    head, tail = KV_SIZE[:-8], KV_SIZE[-8:]
    wait = pending(head)
    assert wait.absorb(tail) and wait.complete
    assert wait.record().msg == "GPU KV cache size: 28,947,616 tokens"
    assert not wait.absorb("more")  # complete: it takes nothing else


def test_a_line_that_starts_a_record_is_never_taken_as_a_continuation() -> None:
    wait = pending(KV_CONCURRENCY[:-1])
    assert not wait.absorb(KV_SIZE) and not wait.absorb("Traceback (most recent call last):")
    assert not wait.absorb('  File "/x.py", line 3, in f') and wait.parts == []
    assert wait.record().msg == parse_segment(KV_CONCURRENCY[:-1]).msg  # alone, as it was


def test_the_engine_config_cut_at_160_columns_is_rebuilt_to_the_character() -> None:
    pieces = cut(ENGINE_CONFIG, 160)
    wait = pending(pieces[0])
    taken = [wait.absorb(piece) for piece in pieces[1:]]
    assert all(taken) and not wait.complete  # the config line never knows it has ended
    assert not wait.absorb(LINES[15])  # the next real record ends it
    assert wait.record() == parse_segment(ENGINE_CONFIG)


def test_an_echoed_command_takes_its_next_lines_whatever_they_start_with() -> None:
    wait = pending("vllm serve Qwen/Qwen3-8B \\")
    assert wait.absorb("    --tensor-parallel-size 2 \\") and not wait.complete
    assert wait.absorb("    --port 8100") and wait.complete
    facts = configline.from_command(wait.record().msg.split("vllm serve", 1)[1])
    assert facts == {"model": "Qwen/Qwen3-8B", "tensor_parallel_size": 2, "served_port": 8100}


def test_a_record_waits_for_at_most_64_lines() -> None:
    wait = pending(ENGINE_CONFIG[:300])
    assert all(wait.absorb("x" * 10) for _ in range(64))
    assert not wait.absorb("x" * 10) and len(wait.parts) == 64


def test_a_record_stops_taking_lines_past_256_kib() -> None:
    wait = pending(ENGINE_CONFIG[:300])
    assert wait.absorb("y" * (256 * 1024)) and wait.absorb("z")  # the line that crosses is still taken
    assert not wait.absorb("z")


def test_the_parser_reads_the_recorded_start_the_same_when_every_long_line_is_wrapped() -> None:
    wrapped = "\n".join(piece for text in LINES for piece in (cut(text, 160) or [""]))
    whole, cut_up = parse_text(TINY.decode("utf-8"))[0], parse_text(wrapped)[0]
    graphs = ["cudagraph_mode", "capture_sizes", "max_capture_size", "kv_cache_tokens", "max_concurrency"]
    keys = [*graphs, "model", "served_model_name", "enforce_eager", "tensor_parallel_size", "outcome"]
    for key in keys:
        assert getattr(cut_up, key) == getattr(whole, key), key
    assert whole.kv_cache_tokens == 28_947_616 and len(whole.capture_sizes or []) == 51
