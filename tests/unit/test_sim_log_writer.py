"""The simulator writes its log as vLLM does (vllm_sim/logline.py; vllm-facts.md §1): the prefix,
the local time without a year, multi-line records re-prefixed and joined with `\\r\\n`, raw lines
prefixed only where that release prefixed its streams, tqdm bars redrawn with `\\r`. Written into a
real pipe and read back."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from vllm_sim.logline import LogWriter, format_seconds, tqdm_line
from vllm_sim.versions import DIALECTS

PREFIX = re.compile(
    r"^\(EngineCore_DP0 pid=(\d+)\) (INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) \[(\S+)\] (.*)$"
)


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    yield out_r, out_w, err_r, err_w
    for fd in (out_r, out_w, err_r, err_w):
        os.close(fd)


def drain(fd: int) -> str:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 20).decode()
    except BlockingIOError:
        return ""


def writer(
    pipes: tuple[int, int, int, int], version: str = "0.26", name: str = "EngineCore_DP0"
) -> LogWriter:
    return LogWriter(name, DIALECTS[version], out_fd=pipes[1], err_fd=pipes[3])


def test_a_record_has_vllms_prefix_and_goes_to_stdout(pipes: tuple[int, int, int, int]) -> None:
    writer(pipes).info("core.py:117", "Initializing a V1 LLM engine (v0.26.0) with config: model='m'")
    out, err = drain(pipes[0]), drain(pipes[2])
    assert err == "" and out.endswith("\n") and out.count("\n") == 1
    match = PREFIX.match(out.rstrip("\n"))
    assert match is not None, out
    assert int(match[1]) == os.getpid() and match[2] == "INFO" and match[4] == "core.py:117"
    assert match[5] == "Initializing a V1 LLM engine (v0.26.0) with config: model='m'"


def test_each_level_is_named(pipes: tuple[int, int, int, int]) -> None:
    log = writer(pipes)
    log.warning("a.py:1", "w")
    log.error("a.py:2", "e")
    levels = [PREFIX.match(line)[2] for line in drain(pipes[0]).splitlines()]  # type: ignore[index]
    assert levels == ["WARNING", "ERROR"]


def test_a_multi_line_message_is_one_write_each_line_prefixed_and_joined_by_cr_lf(
    pipes: tuple[int, int, int, int],
) -> None:
    writer(pipes).error("core.py:1", "EngineCore failed to start.\nTraceback (most recent call last):\n  x")
    out = drain(pipes[0])
    assert out.count("\n") == 3 and out.count("\r\n") == 2, "one record: lines end in \\r but one newline"
    lines = out.rstrip("\n").split("\r\n")
    assert [PREFIX.match(line)[5] for line in lines] == [  # type: ignore[index]
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        "  x",
    ]


def test_the_logging_prefix_comes_first(
    pipes: tuple[int, int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_LOGGING_PREFIX", "[node-3] ")
    writer(pipes, name="APIServer").info("api_server.py:677", "Starting vLLM server on http://0.0.0.0:8000")
    assert drain(pipes[0]).startswith(f"[node-3] (APIServer pid={os.getpid()}) INFO ")


def test_raw_lines_are_prefixed_only_where_the_release_prefixed_its_streams(
    pipes: tuple[int, int, int, int],
) -> None:
    assert DIALECTS["0.26"].prefix_streams and not DIALECTS["0.33"].prefix_streams
    writer(pipes, "0.26", "APIServer").raw("INFO:     Started server process [42]")
    assert drain(pipes[2]) == f"(APIServer pid={os.getpid()}) INFO:     Started server process [42]\n"
    writer(pipes, "0.33", "APIServer").raw("INFO:     Started server process [42]")
    assert drain(pipes[2]) == "INFO:     Started server process [42]\n"
    writer(pipes, "0.33", "APIServer").raw("a print()", stderr=False)
    assert drain(pipes[0]) == "a print()\n" and drain(pipes[2]) == ""


def test_a_bar_is_redrawn_on_one_line_and_closed_with_a_newline(pipes: tuple[int, int, int, int]) -> None:
    log = writer(pipes, "0.26")
    log.bar_update("Capturing CUDA graphs:  50%", first=True, last=False)
    log.bar_update("Capturing CUDA graphs: 100%", first=False, last=True)
    assert drain(pipes[2]) == (
        f"(EngineCore_DP0 pid={os.getpid()}) \rCapturing CUDA graphs:  50%\rCapturing CUDA graphs: 100%\n"
    )
    modern = writer(pipes, "0.33")
    modern.bar_update("a", first=True, last=False)
    modern.bar_update("b", first=False, last=True)
    assert drain(pipes[2]) == "a\rb\n", "0.33 shows the first redraw without the \\r"


def test_a_closed_pipe_does_not_kill_the_simulated_server() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        LogWriter("APIServer", DIALECTS["0.33"], out_fd=write_end, err_fd=write_end).info(
            "x.py:1", "nobody reads"
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    ("n", "total", "elapsed", "line"),
    [
        (0, 4, 0.0, "Capturing CUDA graphs (decode, FULL):   0%|          | 0/4 [00:00<?, ?it/s]"),
        (2, 4, 1.0, "Capturing CUDA graphs (decode, FULL):  50%|█████     | 2/4 [00:01<00:01,  2.00it/s]"),
        (4, 4, 8.0, "Capturing CUDA graphs (decode, FULL): 100%|██████████| 4/4 [00:08<00:00,  2.00s/it]"),
        (1, 3, 0.5, "Capturing CUDA graphs (decode, FULL):  33%|███▎      | 1/3 [00:00<00:01,  2.00it/s]"),
    ],
)
def test_a_tqdm_bar_reads_as_tqdm_draws_it(n: int, total: int, elapsed: float, line: str) -> None:
    assert tqdm_line("Capturing CUDA graphs (decode, FULL)", n, total, elapsed) == line


def test_the_shard_bar_counts_without_a_bar() -> None:
    assert tqdm_line("Loading safetensors checkpoint shards", 1, 2, 3.0, shards=True) == (
        "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:03<00:03,  3.00s/it]"
    )


def test_seconds_are_minutes_and_seconds() -> None:
    assert [format_seconds(s) for s in (0, 59.9, 61, 3599)] == ["00:00", "00:59", "01:01", "59:59"]
