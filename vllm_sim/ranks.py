"""Where model-side lines come from, and who runs each engine step: the engine itself (TP=1) or
its `Worker_TPn` children (TP>1).

With TP>1 vLLM logs per-rank lines from each worker and draws tqdm bars on global rank 0 only
(vllm-facts.md §2); the engine drives its workers through pipes and waits for each command to be
done. Every rank runs every engine step (vllm-facts.md §17): one worker stopped stops the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Protocol

from vllm_sim.logline import LogWriter, tqdm_line

BAR_STEPS = 5


def draw_bar(
    log: LogWriter, desc: str, total: int, seconds: float, wait: Callable[[float], None], shards: bool = False
) -> None:
    """A tqdm bar redrawn a few times over `seconds` (stderr, `\\r` between updates)."""
    steps = min(BAR_STEPS, max(total, 1))
    own_lines = shards and log.dialect.shard_bar_lines  # 0.26.0's shard bar: a line per redraw
    log.bar_update(tqdm_line(desc, 0, total, 0.0, shards), first=True, last=own_lines)
    elapsed = 0.0
    for i in range(1, steps + 1):
        wait(seconds / steps)
        elapsed += seconds / steps
        n = total * i // steps
        log.bar_update(
            tqdm_line(desc, n, total, elapsed, shards), first=own_lines, last=own_lines or i == steps
        )


class Ranks(Protocol):
    count: int

    def log(self, level: str, src: str, make: Callable[[int], str]) -> None: ...
    def bar(self, desc: str, total: int, seconds: float, shards: bool = False) -> None: ...
    def rename(self) -> None: ...
    def fail(self, rank: int, message: str) -> None: ...
    def hold_gpu(self, util: float) -> None: ...
    def resize_gpu(self, gib: float | None) -> str | None: ...
    def step(self, seq: int) -> None: ...


class LocalRanks:
    """TP=1: the uni executor runs the model inside EngineCore, so its lines carry that prefix."""

    count = 1

    def __init__(
        self, log: LogWriter, wait: Callable[[float], None], hold: Callable[[float, int], None]
    ) -> None:
        self._log = log
        self._wait = wait
        self._hold = hold

    def log(self, level: str, src: str, make: Callable[[int], str]) -> None:
        self._log.record(level, src, make(0))

    def bar(self, desc: str, total: int, seconds: float, shards: bool = False) -> None:
        draw_bar(self._log, desc, total, seconds, self._wait, shards)

    def rename(self) -> None:
        return None

    def fail(self, rank: int, message: str) -> None:
        return None  # the engine itself reports the failure

    def hold_gpu(self, util: float) -> None:
        self._hold(util, 0)

    def resize_gpu(self, gib: float | None) -> str | None:
        return None  # the engine resizes its own hold (EngineProcess.resize_gpu)

    def step(self, seq: int) -> None:
        return None  # the uni executor runs the model in the engine core's own step


Answered = Callable[[Sequence[Connection]], Sequence[Connection]]


class RemoteRanks:
    """TP>1: one pipe per worker; every command is acknowledged, so log order follows the script.

    `answered(conns)` blocks until some of `conns` can be read and returns those: the engine core's
    wait (`EngineProcess.answered`), which acts on SIGTERM and its parent's end meanwhile and keeps
    the API server's messages for after the command, as vLLM's busy loop reads its input queue only
    between steps."""

    def __init__(self, conns: list[Connection], answered: Answered) -> None:
        self.conns = conns
        self.count = len(conns)
        self._answered = answered
        self._gone: set[Connection] = set()  # workers that died: they take part in no step

    def _ask(self, rank: int, message: tuple[object, ...]) -> tuple[object, ...]:
        conn = self.conns[rank]
        conn.send(message)
        self._answered([conn])
        reply: tuple[object, ...] = conn.recv()
        return reply

    def step(self, seq: int) -> None:
        """Every worker runs the step, as vLLM's ranks do (vllm-facts.md §17): the step goes to all
        of them, and returns once each has acknowledged it. A stopped worker holds it for as long as
        it is stopped. A dead one is left out: its death is not simulated (the engine goes on)."""
        waiting = []
        for conn in self.conns:
            if conn not in self._gone and self._sent(conn, ("step", seq)):
                waiting.append(conn)
        while waiting:
            for conn in self._answered(waiting):
                waiting.remove(conn)
                try:
                    conn.recv()
                except (EOFError, OSError):
                    self._gone.add(conn)

    def _sent(self, conn: Connection, message: tuple[object, ...]) -> bool:
        try:
            conn.send(message)
        except OSError:
            self._gone.add(conn)
            return False
        return True

    def log(self, level: str, src: str, make: Callable[[int], str]) -> None:
        for rank in range(self.count):
            self._ask(rank, ("log", level, src, make(rank)))

    def bar(self, desc: str, total: int, seconds: float, shards: bool = False) -> None:
        self._ask(0, ("bar", desc, total, seconds, shards))

    def rename(self) -> None:
        for rank in range(self.count):
            self._ask(rank, ("rename",))

    def fail(self, rank: int, message: str) -> None:
        self._ask(rank, ("fail", message))

    def hold_gpu(self, util: float) -> None:
        for rank in range(self.count):
            self._ask(rank, ("hold", util))

    def resize_gpu(self, gib: float | None) -> str | None:
        """Every worker resizes its hold; the first one's failure (CUDA's words), else None."""
        failures = [self._ask(rank, ("resize", gib)) for rank in range(self.count)]
        return next((str(reply[1]) for reply in failures if reply[0] == "failed"), None)

    def loaded_gpu(self) -> None:
        for rank in range(self.count):
            self._ask(rank, ("loaded",))
