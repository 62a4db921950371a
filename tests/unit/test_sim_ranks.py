"""Where the simulated model's lines come from (vllm_sim/ranks.py; vllm-facts.md §2): with TP=1 the
engine writes them itself, with TP>1 each worker does, commanded over a real pipe and acknowledged, so
the log's order follows the script; tqdm bars are drawn on rank 0 only, redrawn a few times."""

from __future__ import annotations

import multiprocessing.connection
import os
import re
import threading
from collections.abc import Iterator, Sequence
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


def answered(conns: Sequence[Connection]) -> list[Connection]:
    """The engine's wait for its workers, without the engine: block until some can be read."""
    ready = multiprocessing.connection.wait(conns)
    return [conn for conn in conns if conn in ready]


class Workers:
    """The worker ends of the pipes: each records what it was told and acknowledges it; the `held`
    rank answers only once `release` is set (a stopped worker), the `dead` one has exited."""

    def __init__(self, count: int, held: int | None = None, dead: int | None = None) -> None:
        pairs = [Pipe() for _ in range(count)]
        self.engine_ends: list[Connection] = [a for a, _ in pairs]
        self.told: list[tuple[int, tuple[object, ...]]] = []
        self.held = held
        self.release = threading.Event()
        self._cond = threading.Condition()
        if dead is not None:
            pairs[dead][1].close()
        self._threads = [threading.Thread(target=self._serve, args=(rank, b), daemon=True)
                         for rank, (_, b) in enumerate(pairs) if rank != dead]  # fmt: skip
        for thread in self._threads:
            thread.start()

    def _serve(self, rank: int, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return
            with self._cond:
                self.told.append((rank, message))
                self._cond.notify_all()
            if rank == self.held:
                self.release.wait(300)
            conn.send("done")

    def heard(self, count: int) -> bool:
        """Whether `count` messages came, waited for (the deadline only ends a hang)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.told) >= count, 300)

    def close(self) -> None:
        self.release.set()
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
    ranks = RemoteRanks(workers.engine_ends, answered)
    ranks.log("INFO", "gpu_worker.py:561", lambda rank: f"Available KV cache memory: {10 + rank} GiB")
    assert ranks.count == 4
    assert workers.told == [
        (rank, ("log", "INFO", "gpu_worker.py:561", f"Available KV cache memory: {10 + rank} GiB"))
        for rank in range(4)
    ]


def test_bars_go_to_rank_zero_and_every_command_waits_for_its_acknowledgement(workers: Workers) -> None:
    ranks = RemoteRanks(workers.engine_ends, answered)
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


def test_a_step_goes_to_every_worker_and_returns_only_once_each_has_run_it() -> None:
    """vLLM's ranks all run every step (vllm-facts.md §17): one that does not answer (stopped)
    holds the step, however long, and the step returns once it does."""
    workers = Workers(4, held=2)
    try:
        ranks = RemoteRanks(workers.engine_ends, answered)
        stepping = threading.Thread(target=ranks.step, args=(7,), daemon=True)
        stepping.start()
        assert workers.heard(4)
        assert sorted(workers.told) == [(rank, ("step", 7)) for rank in range(4)]
        assert stepping.is_alive(), "three ranks answered; the step waits for the fourth"
        workers.release.set()
        stepping.join(300)
        assert not stepping.is_alive()
    finally:
        workers.close()


def test_a_worker_that_died_takes_part_in_no_step() -> None:
    """Its death is not simulated: the engine steps on with the others."""
    workers = Workers(4, dead=1)
    try:
        ranks = RemoteRanks(workers.engine_ends, answered)
        ranks.step(1)
        ranks.step(2)
        assert sorted(workers.told) == sorted((rank, ("step", seq)) for seq in (1, 2) for rank in (0, 2, 3))
    finally:
        workers.close()
