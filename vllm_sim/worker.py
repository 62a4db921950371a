"""A `VLLM::Worker_TPn` process (TP>1): it runs every engine step, prints its rank's lines when the
engine asks, and dies with it.

Every step the engine core runs waits for each worker's acknowledgement, as vLLM's engine waits on
its ranks (vllm-facts.md §17): SIGSTOP of one worker stops every stream. Like vLLM's workers it
watches its parent through a pipe and logs `Parent process exited, terminating worker queues` when
the engine goes away (vllm-facts.md §6), except with `--sim-orphans`.
"""

from __future__ import annotations

import contextlib
import select
import time
from multiprocessing.connection import Connection

from vllm_sim.config import SimConfig
from vllm_sim.gpu_set import gpu_memory
from vllm_sim.lifecycle import TermPolicy, leave, set_title
from vllm_sim.logline import LogWriter
from vllm_sim.ranks import draw_bar
from vllm_sim.tracebacks import WORKER_FRAMES, WORKER_WAKE_UP_026, traceback_text
from vllm_sim.versions import dialect_for


class WorkerProcess:
    def __init__(self, rank: int, cfg: SimConfig, conn: Connection) -> None:
        self.rank = rank
        self.cfg = cfg
        self.conn: Connection | None = conn
        self.dialect = dialect_for(cfg.version)
        self.log = LogWriter("Worker", self.dialect)
        self.term = TermPolicy(cfg.faults.ignore_sigterm_s, immune=cfg.faults.orphans)
        self.gpu = gpu_memory(cfg.gpu_set, cfg.gpu_devices)
        self._poller: select.poll | None = None  # the pipe's, polled for every engine step

    def run(self) -> int:
        set_title("Worker")
        self.term.install()
        while not self.term.due():
            message = self._next(0.05)
            if message is None:
                continue
            if message[0] == "step":  # every engine step: the forward pass of this rank
                self._ack()
                continue
            code = self._handle(message)
            if code is not None:
                return code
        return 0

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def _next(self, timeout: float) -> tuple[object, ...] | None:
        if self.conn is None:
            time.sleep(timeout)
            return None
        if self._poller is None:  # one poll object for good: `Connection.poll` builds a selector per call
            self._poller = select.poll()
            self._poller.register(self.conn.fileno(), select.POLLIN)
        try:
            if not self._poller.poll(timeout * 1000):
                return None
            message: tuple[object, ...] = self.conn.recv()
            return message
        except (EOFError, OSError):
            return ("parent_gone",)

    def _handle(self, message: tuple[object, ...]) -> int | None:
        kind = message[0]
        if kind == "parent_gone":
            if self.cfg.faults.orphans:
                self.conn = None
                return None
            self.log.info(
                self.dialect.src("worker_parent_exit"), "Parent process exited, terminating worker queues"
            )
            return 0
        if kind == "log":
            _, level, src, text = message
            self.log.record(str(level), str(src), str(text))
        elif kind == "bar":
            _, desc, total, seconds, shards = message
            draw_bar(self.log, str(desc), int(str(total)), float(str(seconds)), self.wait, bool(shards))
        elif kind == "rename":
            self.log.name = f"Worker_TP{self.rank}"
            set_title(self.log.name)
        elif kind == "hold":
            why = self.gpu.allocate(float(str(message[1])), self.rank)
            if why:
                self.log.raw(f"vllm-sim: --sim-gpu-allocate holds nothing on rank {self.rank}: {why}")
        elif kind == "resize":
            failed = self.gpu.resize(None if message[1] is None else float(str(message[1])))
            if failed:
                self._wake_failed(failed)
                self._ack(("failed", failed))
                return None
        elif kind == "loaded":
            self.gpu.loaded()
        elif kind == "fail":
            text = traceback_text(WORKER_FRAMES, str(message[1]))
            self.log.error(self.dialect.src("worker_failed"), "WorkerProc failed to start.\n" + text)
            self._ack()
            return 1
        elif kind == "exit":
            self._ack()
            return 0
        self._ack()
        return None

    def _wake_failed(self, error: str) -> None:
        """A wake with no room: the C extension's line on stderr, then `logger.exception` of the
        worker's busy loop; the worker lives on (vllm-facts.md §16)."""
        self.log.native(error)
        text = traceback_text(WORKER_WAKE_UP_026, f"RuntimeError: {error}")
        self.log.error(self.dialect.src("worker_exception"), "WorkerProc hit an exception.\n" + text)

    def _ack(self, reply: tuple[object, ...] = ("ok",)) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.send(reply)


def worker_main(rank: int, cfg: SimConfig, conn: Connection) -> None:
    """Spawn target of each worker."""
    code = WorkerProcess(rank, cfg, conn).run()
    leave(code)
