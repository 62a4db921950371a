"""Where the simulated model's lines come from (vllm_sim/ranks.py; vllm-facts.md §2): with TP=1 the
engine writes them itself, with TP>1 each worker does, commanded over a real pipe and acknowledged, so
the log's order follows the script; tqdm bars are drawn on rank 0 only, redrawn a few times."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import pytest

from vllm_sim.logline import LogWriter
from vllm_sim.ranks import BAR_STEPS, LocalRanks, RemoteRanks, draw_bar
from vllm_sim.versions import DIALECTS


@pytest.fixture
def err_pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def drained(fd: int) -> str:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1 << 20).decode()
    except BlockingIOError:
        return ""


def test_a_bar_is_redrawn_a_few_times_over_its_seconds_and_closed_once(err_pipe: tuple[int, int]) -> None:
    waited: list[float] = []
    log = LogWriter("EngineCore_DP0", DIALECTS["0.33"], out_fd=err_pipe[1], err_fd=err_pipe[1])
    draw_bar(log, "Capturing CUDA graphs (decode, FULL)", 35, 2.5, waited.append)
    text = drained(err_pipe[0])
    assert waited == [2.5 / BAR_STEPS] * BAR_STEPS and sum(waited) == pytest.approx(2.5)
    redraws = text.rstrip("\n").split("\r")
    assert len(redraws) == 1 + BAR_STEPS and text.endswith("\n") and text.count("\n") == 1
    counts = [re.search(r" (\d+/35) \[", r)[1] for r in redraws]  # type: ignore[index]
    assert counts == ["0/35", "7/35", "14/35", "21/35", "28/35", "35/35"]


def test_a_bar_of_fewer_items_than_steps_is_redrawn_once_per_item(err_pipe: tuple[int, int]) -> None:
    waited: list[float] = []
    log = LogWriter("EngineCore_DP0", DIALECTS["0.33"], out_fd=err_pipe[1], err_fd=err_pipe[1])
    draw_bar(log, "Loading safetensors checkpoint shards", 2, 1.0, waited.append, shards=True)
    assert waited == [0.5, 0.5]
    assert drained(err_pipe[0]).count("Completed |") == 3


def test_the_026_shard_bar_puts_each_redraw_on_a_line_of_its_own(err_pipe: tuple[int, int]) -> None:
    log = LogWriter("EngineCore_DP0", DIALECTS["0.26"], out_fd=err_pipe[1], err_fd=err_pipe[1])
    assert DIALECTS["0.26"].shard_bar_lines
    draw_bar(log, "Loading safetensors checkpoint shards", 2, 1.0, lambda s: None, shards=True)
    lines = drained(err_pipe[0]).rstrip("\n").split("\n")
    prefix = f"(EngineCore_DP0 pid={os.getpid()}) \rLoading safetensors checkpoint shards: "
    assert len(lines) == 3 and all(line.startswith(prefix) for line in lines), lines


def test_one_rank_logs_in_the_engine_and_holds_its_gpu_itself(err_pipe: tuple[int, int]) -> None:
    held: list[tuple[float, int]] = []
    log = LogWriter("EngineCore_DP0", DIALECTS["0.33"], out_fd=err_pipe[1], err_fd=err_pipe[1])
    ranks = LocalRanks(log, lambda s: None, lambda util, rank: held.append((util, rank)))
    ranks.log("INFO", "gpu_worker.py:1", lambda rank: f"Available KV cache memory: 10.0 GiB (rank {rank})")
    ranks.hold_gpu(0.9)
    ranks.rename()
    ranks.fail(0, "ignored: the engine reports it")
    assert ranks.count == 1 and held == [(0.9, 0)]
    assert drained(err_pipe[0]).rstrip("\n").endswith("] Available KV cache memory: 10.0 GiB (rank 0)")


class Workers:
    """The worker ends of the pipes: each records what it was told and acknowledges it."""

    def __init__(self, count: int) -> None:
        pairs = [Pipe() for _ in range(count)]
        self.engine_ends: list[Connection] = [a for a, _ in pairs]
        self.told: list[tuple[int, tuple[object, ...]]] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, args=(rank, b), daemon=True)
                         for rank, (_, b) in enumerate(pairs)]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def _serve(self, rank: int, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            with self._lock:
                self.told.append((rank, message))
            conn.send("done")

    def close(self) -> None:
        for conn in self.engine_ends:
            conn.close()
        for thread in self._threads:
            thread.join(timeout=300)


@pytest.fixture
def workers() -> Iterator[Workers]:
    made = Workers(4)
    yield made
    made.close()


def test_with_tp_above_one_every_rank_logs_its_own_line_in_rank_order(workers: Workers) -> None:
    ranks = RemoteRanks(workers.engine_ends, time.sleep)
    ranks.log("INFO", "gpu_worker.py:561", lambda rank: f"Available KV cache memory: {10 + rank} GiB")
    assert ranks.count == 4
    assert workers.told == [
        (rank, ("log", "INFO", "gpu_worker.py:561", f"Available KV cache memory: {10 + rank} GiB"))
        for rank in range(4)
    ]


def test_bars_go_to_rank_zero_and_every_command_waits_for_its_acknowledgement(workers: Workers) -> None:
    ranks = RemoteRanks(workers.engine_ends, time.sleep)
    ranks.bar("Capturing CUDA graphs", 35, 2.0)
    ranks.rename()
    ranks.hold_gpu(0.85)
    ranks.fail(2, "CUDA error: out of memory")
    assert workers.told == [
        (0, ("bar", "Capturing CUDA graphs", 35, 2.0, False)),
        *[(rank, ("rename",)) for rank in range(4)],
        *[(rank, ("hold", 0.85)) for rank in range(4)],
        (2, ("fail", "CUDA error: out of memory")),
    ], "each answered before the next was sent: the log's order is the script's"
