"""The `VLLM::EngineCore` process: startup log, workers, real memory, faults, and `[shutdown]` lines.

The request scheduler lives in the API process (one asyncio loop, exact socket timestamps), but
each of its steps runs only once this process has run it (`engine_loop.py`), so the engine is what
makes tokens: stop it and every stream stops. It is also what an operator watches from outside:
its title, its log, its memory, its death.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from vllm_sim import wire
from vllm_sim.ballast import Ballast
from vllm_sim.config import SimConfig
from vllm_sim.engine_loop import TICK_S, ServingLoop
from vllm_sim.gpu_set import gpu_memory
from vllm_sim.lifecycle import TermPolicy, leave, set_title
from vllm_sim.logline import LogWriter
from vllm_sim.ranks import LocalRanks, Ranks, RemoteRanks
from vllm_sim.startup import Startup, StartupFailed
from vllm_sim.tracebacks import ENGINE_FRAMES, PROCESS_026, engine_frames_026, traceback_text
from vllm_sim.versions import dialect_for
from vllm_sim.worker import worker_main

WORKER_FAILED = (
    "Exception: WorkerProc initialization failed due to an exception in a background process. "
    "See stack trace for root cause."
)


LINGER_S = 5.0


class Stop(Exception):
    """SIGTERM (or the API's shutdown) arrived: leave whatever phase we are in."""


class EngineProcess:
    def __init__(self, cfg: SimConfig, conn: Connection) -> None:
        self.cfg = cfg
        self.conn: Connection | None = conn
        self.dialect = dialect_for(cfg.version)
        self.log = LogWriter(self.dialect.engine_name, self.dialect)
        self.term = TermPolicy(cfg.faults.ignore_sigterm_s, immune=cfg.faults.orphans)
        self.ballast = Ballast(
            cfg.faults.leak_mib_per_min, cfg.faults.warmup_growth_mib, cfg.faults.warmup_growth_s
        )
        self.ballast.add_pressure(cfg.faults.host_pressure_mib, cfg.faults.host_pressure_s)
        self.gpu = gpu_memory(cfg.gpu_set, cfg.gpu_devices)
        self.workers: list[BaseProcess] = []
        self.inflight = 0
        self.serving: ServingLoop | None = None
        self._remote: RemoteRanks | None = None
        self._wakeup: int | None = None  # readable when a signal arrived (TermPolicy.install)
        self._kept: deque[tuple[object, ...]] = deque()  # what the API sent while the workers ran a command

    # --- waiting: every sleep watches the parent and the signals ---
    def wait(self, seconds: float, *, until: Callable[[], bool] | None = None) -> None:
        """Block until `seconds` pass (or `until()` holds after a message), answering messages and
        acting on SIGTERM as soon as it is due: a signal wakes the wait, it is not polled for."""
        deadline = time.monotonic() + seconds
        while True:
            if self.serving is not None and self.serving.stuck:
                return  # wedged: from now on nothing but SIGKILL ends it (engine_loop.py)
            self.check_term()
            left = deadline - time.monotonic()
            if left <= 0 or (until is not None and until()):
                return
            due_in = self.term.due_in()
            self._poll(left if due_in is None else min(left, max(due_in, 0.001)))

    def check_term(self) -> None:
        if self.term.due():
            raise Stop

    def poll_only(self, seconds: float) -> None:
        """Read what comes (and notice the parent's end) without acting on a SIGTERM."""
        self._poll(seconds)

    def hang(self) -> None:
        while True:
            self.wait(3600)

    def answered(self, workers: Sequence[Connection]) -> list[Connection]:
        """Block until some of the `workers`' pipes can be read (a command or a step they run) and
        return those. Meanwhile SIGTERM and the parent's end are acted on as in `wait`, and the API
        server's messages are kept for afterwards: vLLM's busy loop, blocked on its workers, reads
        its input queue only between steps. Memory that grows keeps its clock."""
        while True:
            self.check_term()
            due_in = self.term.due_in()
            timeout = TICK_S if self.ballast.grows else None
            if due_in is not None:
                timeout = max(due_in, 0.001) if timeout is None else min(timeout, max(due_in, 0.001))
            ready = multiprocessing.connection.wait([*workers, *self._inputs()], timeout)
            self.ballast.tick(time.monotonic())
            replied = [conn for conn in workers if conn in ready]
            if replied:
                return replied
            message = self._read(ready)
            if message is not None:
                self._kept.append(message)

    def _inputs(self) -> list[Connection | int]:
        """What wakes the engine: a signal (its wakeup descriptor) and the API server's pipe."""
        inputs: list[Connection | int] = [self._wakeup] if self._wakeup is not None else []
        if self.conn is not None:
            inputs.append(self.conn)
        return inputs

    def _poll(self, timeout: float) -> None:
        """Handle a message kept during a command of the workers, else wait up to `timeout` for a
        message or a signal and handle the message if one came."""
        if self._kept and self.serving is not None:
            self.serving.handle(self._kept.popleft())
            return
        inputs = self._inputs()
        if not inputs:
            time.sleep(timeout)
            return
        message = self._read(multiprocessing.connection.wait(inputs, timeout))
        if message is not None and self.serving is not None:
            self.serving.handle(message)

    def _read(self, ready: Sequence[object]) -> tuple[object, ...] | None:
        """Take what `ready` holds for us: a signal's wake-up, the API's shutdown or end, or a
        message for the serving loop (returned)."""
        if self._wakeup is not None and self._wakeup in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wakeup, 64)  # the signal's own handler has run: check_term() sees it
        if self.conn is None or self.conn not in ready:
            return None
        try:
            message = wire.decode(self.conn.recv_bytes())
        except (EOFError, OSError):
            self._parent_gone()
            return None
        if message[0] == "shutdown":
            self.inflight = int(message[1])
            self.term.trigger()
            return None
        return message

    def _parent_gone(self) -> None:
        self.conn = None
        if not self.cfg.faults.orphans and self.dialect.engine_follows_api_server:
            self._stop_workers()
            leave(0)

    # --- the life of the engine ---
    def run(self) -> int:
        set_title(self.dialect.engine_name)
        self._wakeup = self.term.install()
        try:
            ranks = self._ranks()
            Startup(self.cfg, self.dialect, self.log, ranks, self.wait, self.hang).run()
            self._gpu_loaded()
            self.serving = ServingLoop(self, ranks)
            self.send(("ready", os.getpid()))
            self.serving.run()
        except Stop:
            self._shutdown()
            return 0
        except StartupFailed as failure:
            self._report_failure(failure)
            return 1
        return 1

    def _ranks(self) -> Ranks:
        if self.cfg.tp == 1:
            return LocalRanks(self.log, self.wait, self._hold_gpu)
        context = multiprocessing.get_context("spawn")
        conns: list[Connection] = []
        for rank in range(self.cfg.tp):
            mine, theirs = context.Pipe()
            proc = context.Process(
                target=worker_main, args=(rank, self.cfg, theirs), name=f"VllmWorker-{rank}", daemon=True
            )
            proc.start()
            theirs.close()
            self.workers.append(proc)
            conns.append(mine)
        self._remote = RemoteRanks(conns, self.answered)
        return self._remote

    def _hold_gpu(self, util: float, device: int) -> None:
        why = self.gpu.allocate(util, device)
        if why:
            self.log.raw(f"vllm-sim: --sim-gpu-allocate holds nothing: {why}")

    def _holds_gpu(self) -> bool:
        return self.cfg.faults.gpu_allocate or self.cfg.gpu_set is not None

    def _gpu_loaded(self) -> None:
        """Ready: the memory each rank holds is what it serves with (a simulated set records it)."""
        if not self._holds_gpu():
            return
        if self._remote is not None:
            self._remote.loaded_gpu()
        else:
            self.gpu.loaded()

    def resize_gpu(self, gib: float | None) -> str | None:
        """Sleep mode: what stands for this engine's GPU memory holds `gib` per GPU (None: all again);
        a wake with no room answers CUDA's words for it (a worker's, with TP > 1)."""
        if not self._holds_gpu():
            return None
        if self._remote is not None:
            return self._remote.resize_gpu(gib)
        return self.gpu.resize(gib)

    def die(self, after_requests: bool) -> None:
        reason = (
            "after N requests (--sim-crash-after-requests)" if after_requests else "(--sim-crash-at serving)"
        )
        frames = ((f"{ENGINE_FRAMES[0][0]}", 1580, "run_engine_core"),)
        self.log.error(
            self.dialect.src("fatal"),
            "EngineCore encountered a fatal error.\n"
            + traceback_text(frames, f"RuntimeError: [vllm-sim] injected engine death {reason}"),
        )
        leave(1)

    def _report_failure(self, failure: StartupFailed) -> None:
        last = failure.last_line
        if failure.rank is not None:
            self._fail_worker(failure.rank, last)
            last = WORKER_FAILED
        frames = engine_frames_026(failure.where, last) if self.dialect.real_frames else ENGINE_FRAMES
        self.log.error(
            self.dialect.src("failed_start"), "EngineCore failed to start.\n" + traceback_text(frames, last)
        )
        if self.dialect.real_frames:  # core.py:1334 re-raises; multiprocessing prints it again
            self.log.raw("Process EngineCore:")
            for line in traceback_text((*PROCESS_026, *frames), last).split("\n"):
                self.log.raw(line)
        self.send(("failed",))
        self._stop_workers()

    def _fail_worker(self, rank: int, last: str) -> None:
        ranks = self._remote
        if ranks is not None:
            with contextlib.suppress(EOFError, OSError, Stop):
                ranks.fail(rank, last)

    def log_term_trigger(self) -> None:
        self.log.info(
            self.dialect.src("sd_core_signal"),
            f"[shutdown] EngineCore: trigger received signal={self.term.signal_name}",
        )

    def _shutdown(self) -> None:
        src = self.dialect.src
        timeout = self.cfg.shutdown_timeout
        mode = "drain" if timeout > 0 else "abort"
        self.log_term_trigger()
        self.log.info(
            src("sd_core_start"), f"[shutdown] EngineCore: start mode={mode} timeout={timeout:.0f}s"
        )
        if mode == "abort":
            if self.inflight or not self.dialect.mpclient_shutdown:  # 0.26.0 said nothing at count=0
                self.log.info(
                    src("sd_core_inflight"),
                    f"[shutdown] EngineCore: aborting in-flight requests count={self.inflight}",
                )
        else:
            self.log.info(
                src("sd_core_inflight"),
                f"[shutdown] EngineCore: draining in-flight requests count={self.inflight} "
                f"timeout={timeout:.0f}s",
            )
        self.log.info(
            src("sd_core_done"),
            "[shutdown] EngineCore: request processing complete; starting resource teardown",
        )
        self._stop_workers()
        if self.dialect.mpclient_shutdown:
            self.log.info(src("sd_core_loop"), "[shutdown] EngineCore: exiting busy loop")
            self.send(("stopped",))
            if mode == "abort":
                self._linger()

    def _linger(self) -> None:
        """0.26.0's engine is still tearing down when its client's 0 s timeout ends: the process
        manager kills it (`force killing remaining processes count=1`). Wait for that kill, or for
        the parent to go, at most LINGER_S."""
        deadline = time.monotonic() + LINGER_S
        while self.conn is not None and time.monotonic() < deadline:
            try:
                self.conn.poll(0.05)
                if self.conn.poll(0):
                    self.conn.recv_bytes()
            except (EOFError, OSError):
                return

    def _stop_workers(self) -> None:
        for proc in self.workers:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + 2.0
        for proc in self.workers:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)

    def send(self, message: tuple[object, ...]) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.send_bytes(wire.encode(message))


def engine_main(cfg: SimConfig, conn: Connection) -> None:
    """Spawn target of the engine core process."""
    code = EngineProcess(cfg, conn).run()
    leave(code)
