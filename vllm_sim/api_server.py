"""The API server process (not renamed, like vLLM's): binds early, starts the engine, listens once ready.

Lifecycle: bind the port (refused connections until ready) → spawn `VLLM::EngineCore` → wait for
its ready/failed message or death → serve → on SIGTERM: `[shutdown]` lines, stop the engine, exit 0;
on engine death: /health 503, requests 500, exit 0 at the watchdog's next look (vLLM issue #48966).
The watchdog looks every `--sim-watchdog-s` (5, scaled) from the server's start, as vLLM's
`watchdog_loop` does (0.26.0 `entrypoints/launcher.py:160-166`): the exit comes 0–5 s after death.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import time
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from vllm_flags.schema import VllmSchema
from vllm_sim import announce
from vllm_sim.config import SimConfig
from vllm_sim.engine_core import engine_main
from vllm_sim.engine_link import EngineDead, EngineLink
from vllm_sim.groundtruth import GroundTruth
from vllm_sim.logline import LogWriter
from vllm_sim.metrics import SimMetrics
from vllm_sim.scheduler import Job, Scheduler
from vllm_sim.tracebacks import API_BIND_026, API_FRAMES
from vllm_sim.versions import dialect_for

if TYPE_CHECKING:
    from vllm_sim.http_server import HttpServer
    from vllm_sim.server_state import ServerState

ENGINE_STOP_S = 5.0
HTTP_GRACE_S = 0.5  # what requests still running when the HTTP server stops are given
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # uvicorn's: each begins the shutdown


class ApiServer:
    def __init__(self, cfg: SimConfig, schema: VllmSchema) -> None:
        self.cfg = cfg
        self.schema = schema
        self.dialect = dialect_for(cfg.version)
        self.log = LogWriter("APIServer", self.dialect)
        self.engine: BaseProcess | None = None
        self.link: EngineLink | None = None
        self.state: ServerState | None = None
        self.http: HttpServer | None = None
        self.outcome: asyncio.Future[str] | None = None
        self.finished_requests = 0
        self.exit_code = 0
        self.term_at: float | None = None
        self.stopped = asyncio.Event()
        self.engine_stopped = asyncio.Event()  # the engine logged its `[shutdown]` lines (0.26)

    def run(self) -> int:
        if not announce.banner_lines(self.log, self.cfg, self.dialect):
            return 1
        time.sleep(self.cfg.timing.startup("api"))  # imports and config resolution (SIGTERM ends it)
        # 0.26.0 binds in setup_server, before it resolves the config (api_server.py:637); 0.33 after
        if not self.dialect.real_frames and not announce.config_lines(
            self.log, self.cfg, self.dialect, self.schema
        ):
            return 1
        try:
            sock = self._bind()
        except OSError as err:
            frames = API_BIND_026 if self.dialect.real_frames else API_FRAMES[:3]
            announce.refused(self.log, [f"OSError: {err}"], frames)
            return 1
        if self.dialect.real_frames and not announce.config_lines(
            self.log, self.cfg, self.dialect, self.schema
        ):
            sock.close()
            return 1
        try:
            return asyncio.run(self._main(sock))
        finally:
            sock.close()

    def _bind(self) -> socket.socket:
        host = self.cfg.host or ""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, self.cfg.port))
        return sock

    async def _main(self, sock: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal)
        try:
            return await self._lifecycle(loop, sock)
        finally:
            # asyncio's loop.close() closes its wakeup pipe before it removes these handlers: a
            # signal in between printed "Exception ignored when trying to write to the signal
            # wakeup fd" after uvicorn's last line. The server has ended: later ones change nothing.
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
                signal.signal(signum, signal.SIG_IGN)

    async def _lifecycle(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> int:
        self.outcome = loop.create_future()
        self._spawn_engine(loop)
        result = await self.outcome
        if result == "term":
            await self._stop_engine()
            self._keyboard_interrupt()
        if result == "failed":
            await self._wait_engine_exit(ENGINE_STOP_S)
            announce.startup_failed(self.log, self.dialect)
            return 1
        await self._serve(sock)
        return self.exit_code

    def _spawn_engine(self, loop: asyncio.AbstractEventLoop) -> None:
        context = multiprocessing.get_context("spawn")
        mine, theirs = context.Pipe()
        self.engine = context.Process(
            target=engine_main, args=(self.cfg, theirs), name=self.dialect.engine_name
        )
        self.engine.start()
        theirs.close()
        self.link = EngineLink(mine, self._on_engine_message)
        self.link.start(loop)
        loop.add_reader(self.engine.sentinel, self._on_engine_exit)

    def _settle(self, result: str) -> None:
        if self.outcome is not None and not self.outcome.done():
            self.outcome.set_result(result)

    def _on_engine_message(self, message: tuple[Any, ...]) -> None:
        if message[0] == "stopped":
            self.engine_stopped.set()
            return
        self._settle("ready" if message[0] == "ready" else "failed")

    def _on_engine_exit(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.engine is not None
        loop.remove_reader(self.engine.sentinel)
        if self.outcome is not None and not self.outcome.done():
            self._settle("failed")
        elif self.state is not None and not self.state.draining:
            self._engine_died(loop)

    def _on_signal(self) -> None:
        if self.term_at is not None:
            return
        self.term_at = time.monotonic()
        delay = self.cfg.faults.ignore_sigterm_s
        loop = asyncio.get_running_loop()
        loop.call_later(delay, self._act_on_signal)

    def _act_on_signal(self) -> None:
        if self.state is None:
            self._settle("term")
        else:
            asyncio.get_running_loop().create_task(self._shutdown())

    def _keyboard_interrupt(self) -> None:
        """SIGTERM before uvicorn runs is `KeyboardInterrupt("terminated")`, uncaught (vllm-facts.md §10)."""
        announce.refused(self.log, ["KeyboardInterrupt: terminated"])
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

    async def _serve(self, sock: socket.socket) -> None:
        # The HTTP side is imported only now, so its import overlaps the engine's startup.
        from vllm_sim.http_app import build_server, routes_for
        from vllm_sim.stats_log import StatsLog

        self.state = state = self._server_state()
        scheduler, truth = state.scheduler, state.truth
        tasks = [asyncio.create_task(scheduler.run()), asyncio.create_task(self._watchdog())]
        if self.cfg.log_stats:
            tasks.append(asyncio.create_task(StatsLog(state).run()))
        host = self.cfg.host or "0.0.0.0"
        await asyncio.sleep(self.cfg.timing.startup("serve"))
        announce.ready_lines(
            self.log, self.cfg, self.dialect, f"http://{host}:{self.cfg.port}", routes_for(self.cfg.dev_mode)
        )
        announce.uvicorn_started(self.log)
        self.http = build_server(state)
        await self.http.start(sock)  # listen() happens here: until now connections were refused
        self.log.raw("INFO:     Application startup complete.")
        await self.stopped.wait()
        for task in tasks:
            task.cancel()
        await self.http.close(HTTP_GRACE_S)
        truth.close()
        announce.uvicorn_stopped(self.log, self.dialect, engine_died=state.engine_dead)

    def _server_state(self) -> ServerState:
        """What the handlers share, the scheduler whose steps the engine core runs included."""
        from vllm_sim.server_state import ServerState

        assert self.link is not None
        mem = self.cfg.memory()
        metrics = SimMetrics()
        truth = GroundTruth(self.cfg.ground_truth)
        truth.open()
        scheduler = Scheduler(self.cfg, metrics, mem.num_blocks, self._on_finished, self.link)
        return ServerState(
            self.cfg,
            self.dialect,
            self.log,
            scheduler,
            metrics,
            truth,
            int(time.time()),
            self._notify_first_request,
            self.link,
            cache_info=self._cache_info(mem.num_blocks),
        )

    def _cache_info(self, blocks: int) -> dict[str, str]:
        cfg = self.cfg
        return {
            "block_size": str(cfg.block_size),
            "cache_dtype": cfg.kv_cache_dtype,
            "enable_prefix_caching": str(cfg.prefix_caching),
            "gpu_memory_utilization": str(cfg.util),
            "num_gpu_blocks": str(blocks),
        }

    def _notify_first_request(self) -> None:
        self._send(("first_request",))

    def _on_finished(self, job: Job, reason: str) -> None:
        self.finished_requests += 1
        limit = self.cfg.faults.crash_after_requests
        if limit is not None and self.finished_requests == limit:
            self._send(("crash",))

    def _send(self, message: tuple[object, ...]) -> None:
        if self.link is not None:
            self.link.send(message)

    def _engine_died(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.state is not None
        announce.engine_died(self.log, self.dialect)
        self.state.engine_dead = True
        self.state.scheduler.stop()
        if self.link is not None:
            self.link.fail_calls(EngineDead())

    async def _watchdog(self) -> None:
        """vLLM's `watchdog_loop`: every 5 s (scaled) from the start, stop the server once the engine
        is dead, unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1 (vllm-facts.md §10)."""
        period = self.cfg.timing.scaled(self.cfg.timing.watchdog_s)
        while True:
            await asyncio.sleep(period)
            dead = self.state is not None and self.state.engine_dead
            if dead and os.environ.get("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH") != "1":
                self.stopped.set()
                return

    async def _shutdown(self) -> None:
        state = self.state
        assert state is not None
        if state.draining:
            return
        state.draining = True
        src, timeout = self.dialect.src, self.cfg.shutdown_timeout
        self.log.info(src("sd_api_trigger"), "[shutdown] API server: shutdown triggered")
        mode = "drain" if timeout > 0 else "abort"
        self.log.info(
            src("sd_api_mode"),
            f"[shutdown] API server: stopping engine client mode={mode} timeout={timeout:.0f}s",
        )
        inflight = state.in_flight  # counted when the shutdown starts, as the engine logs it
        deadline = time.monotonic() + timeout
        while state.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        state.scheduler.stop()
        if not self.cfg.faults.orphans:
            self._send(("shutdown", inflight))
            if self.dialect.mpclient_shutdown:
                await self._stop_engine_client(timeout)
            else:
                await self._stop_engine()
        self.log.info(src("sd_api_stopped"), "[shutdown] API server: engine client stopped")
        self.log.info(src("sd_api_http"), "[shutdown] API server: signalling HTTP server shutdown")
        if self.dialect.mpclient_shutdown:
            self.log.info(src("sd_api_fastapi"), "[shutdown] API server: shutting down FastAPI HTTP server")
        self.stopped.set()

    async def _stop_engine_client(self, timeout: float) -> None:
        """0.26.0's MPClient: once the engine has logged its shutdown, give it `timeout` seconds
        (0 in abort mode), then its process manager kills what is left (real log: count=1)."""
        src = self.dialect.src
        deadline = time.monotonic() + ENGINE_STOP_S + self.cfg.faults.ignore_sigterm_s
        while not self.engine_stopped.is_set() and time.monotonic() < deadline:
            if self.engine is None or not self.engine.is_alive():
                break
            await asyncio.sleep(0.01)
        self.log.info(src("sd_mp_start"), f"[shutdown] MPClient: start timeout={timeout:.0f}s")
        self.log.info(src("sd_mp_stopping"), "[shutdown] MPClient: stopping engine manager")
        if not await self._wait_engine_exit(timeout) and self.engine is not None:
            self.log.warning(
                src("sd_force_kill"), "[shutdown] Process manager: force killing remaining processes count=1"
            )
            self.engine.kill()
            await self._wait_engine_exit(2.0)
        self.log.info(src("sd_mp_stopped"), "[shutdown] MPClient: engine manager stopped")
        self.log.info(src("sd_mp_cleanup"), "[shutdown] MPClient: cleaning up background resources")
        self.log.info(src("sd_mp_done"), "[shutdown] MPClient: complete")

    async def _stop_engine(self) -> None:
        """SIGTERM the engine, wait, then SIGKILL what is left (vLLM's process manager)."""
        if self.engine is None or self.cfg.faults.orphans:
            return
        if self.engine.is_alive() and self.engine.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.engine.pid, signal.SIGTERM)
        if not await self._wait_engine_exit(ENGINE_STOP_S + self.cfg.faults.ignore_sigterm_s):
            self.log.info(
                self.dialect.src("sd_api_mode"),
                "[shutdown] Process manager: force killing remaining processes count=1",
            )
            self.engine.kill()
            await self._wait_engine_exit(2.0)

    async def _wait_engine_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.engine is not None and self.engine.is_alive():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)
        if self.engine is not None:
            self.engine.join(0)
        return True
