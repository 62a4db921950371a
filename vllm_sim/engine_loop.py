"""The engine core's busy loop once it is ready: it runs each step the API server's scheduler asks
for, answers utility calls (sleep mode, prefix cache), holds and grows its real memory, and
injects the serving faults.

Nothing the server streams can come out while this loop does not answer: SIGSTOP of the process
(or, with TP > 1, of one `Worker_TPn`: each step waits for every worker), `--sim-hang-after-requests`
and `--sim-stall-after-tokens` (a kernel that never returns) stop every stream at its next step
while `/health` stays 200. A stuck engine core reads nothing more and acts
on no SIGTERM (vLLM's handler only sets a state its busy loop reads between steps, 0.26.0
`v1/engine/core.py:1311-1320`): only SIGKILL ends it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from vllm_sim.ballast import Ballast
from vllm_sim.config import SimConfig
from vllm_sim.lifecycle import TermPolicy
from vllm_sim.logline import LogWriter
from vllm_sim.ranks import Ranks
from vllm_sim.sleep_mode import SleepMode, UtilityFailed
from vllm_sim.versions import Dialect

TICK_S = 0.05  # while something runs on the clock: memory that grows, a timed crash, a marker to print
IDLE_S = 1.0  # otherwise: messages and signals wake the engine, as vLLM's busy loop blocks on its queue


class Engine(Protocol):
    """The engine core process as its serving loop drives it (`engine_core.EngineProcess`): the loop
    declares what it uses, so the process that runs the loop is not imported back by it."""

    cfg: SimConfig
    dialect: Dialect
    log: LogWriter
    ballast: Ballast
    term: TermPolicy

    def wait(self, seconds: float, *, until: Callable[[], bool] | None = None) -> None: ...

    def poll_only(self, seconds: float) -> None: ...

    def check_term(self) -> None: ...

    def send(self, message: tuple[object, ...]) -> None: ...

    def die(self, after_requests: bool) -> None: ...

    def resize_gpu(self, gib: float | None) -> str | None: ...

    def log_term_trigger(self) -> None: ...


class ServingLoop:
    def __init__(self, engine: Engine, ranks: Ranks) -> None:
        self.engine = engine
        self.cfg = engine.cfg
        self.faults = engine.cfg.faults
        self.ranks = ranks
        self.sleep = SleepMode(engine.cfg, engine.dialect, engine.log, ranks, self._busy, engine.resize_gpu)
        self.stuck = False
        self.first_request = False

    # --- messages from the API server ---
    def handle(self, message: tuple[Any, ...]) -> None:
        if self.stuck:  # nothing else runs in a busy loop stuck in a kernel
            return
        kind = message[0]
        if kind == "step":
            self._step(int(message[1]), int(message[2]), int(message[3]), int(message[4]))
        elif kind == "call":
            self._call(int(message[1]), str(message[2]), tuple(message[3]))
        elif kind == "crash":
            self.engine.die(after_requests=True)  # at once: --sim-crash-after-requests
        elif kind == "first_request":
            self.first_request = True

    def _step(self, seq: int, generated: int, finished: int, decoding: int) -> None:
        hang_at, stall_at = self.faults.hang_after_requests, self.faults.stall_after_tokens
        if hang_at is not None and finished >= hang_at:
            self.stuck = True  # the next step after the N-th finished request never returns
        elif stall_at is not None and generated >= stall_at and decoding > 0:
            self.stuck = True  # mid-batch: the requests decoding in it stay running
        else:
            self.ranks.step(seq)  # with TP > 1 every worker runs it too (vllm-facts.md §17)
            self.engine.send(("stepped", seq))

    def _call(self, call_id: int, method: str, args: tuple[Any, ...]) -> None:
        try:
            value = self._run(method, args)
        except UtilityFailed as err:
            self.engine.send(("result", call_id, False, str(err)))
            return
        if not self.stuck:
            self.engine.send(("result", call_id, True, value))

    def _run(self, method: str, args: tuple[Any, ...]) -> Any:
        sleep = self.sleep
        if method == "pause":
            return sleep.pause(int(args[0]), str(args[1]), int(args[2]), int(args[3]))
        if method == "sleep":
            if bool(args[1]):  # the pause's cache reset, before the executor sleeps (core.py:1785-1798)
                self._reset_prefix_cache(0)
            return sleep.sleep(int(args[0]))
        if method == "wake_up":
            if self.faults.wake_fault == "hang" and sleep.asleep:
                self.stuck = True  # the wake-up never comes back, nor does anything after it
                return None
            return sleep.wake_up(args[0]), sleep.weights_valid
        if method == "is_sleeping":
            return sleep.is_sleeping
        if method == "reset_prefix_cache":
            return self._reset_prefix_cache(int(args[0]))
        if method == "collective_rpc":
            if args[0] == "reload_weights":
                return sleep.reload_weights()
            raise UtilityFailed(
                f"Call to {method} method failed: vllm-sim runs reload_weights only, not {args[0]}"
            )
        raise UtilityFailed(f"Call to {method} method failed: vllm-sim does not simulate it")

    def _reset_prefix_cache(self, used_blocks: int) -> bool:
        """The block pool's reset (0.26.0 `v1/core/block_pool.py:761-790`): only when no request holds
        a block; the API server's scheduler says how many are held."""
        d = self.engine.dialect
        if used_blocks > 0:
            self.engine.log.warning(
                d.src("prefix_reset_failed"),
                f"Failed to reset prefix cache because some blocks ({used_blocks}) are not freed yet",
            )
            return False
        self.engine.log.info(d.src("prefix_reset"), "Successfully reset prefix cache")
        return True

    def _busy(self, seconds: float) -> None:
        """Engine time spent in a utility call: no step runs meanwhile; SIGTERM still ends it."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.engine.check_term()
            time.sleep(min(left, 0.01))

    # --- the loop ---
    def run(self) -> None:
        engine, faults = self.engine, self.faults
        engine.ballast.start_leak(time.monotonic())
        crash_at = None
        if faults.crash_at == "serving":
            crash_at = time.monotonic() + self.cfg.timing.scaled(faults.crash_after_s)
        marker = faults.marker if faults.marker_phase == "serving" else None  # printed at the first request
        while not self.stuck:
            timed = engine.ballast.grows or crash_at is not None
            until = (lambda: self.first_request) if marker else None
            engine.wait(TICK_S if timed else IDLE_S, until=until)
            if self.first_request:
                engine.ballast.start_warmup(time.monotonic())
            engine.ballast.tick(time.monotonic())
            if self.first_request and marker:
                engine.log.info(engine.dialect.src("marker"), marker)
                marker = None
            if crash_at is not None and time.monotonic() >= crash_at:
                engine.die(after_requests=False)
        self._stuck_forever()

    def _stuck_forever(self) -> None:
        """A kernel that never returns: the process only notices its parent's end (vLLM's workers'
        watch) and logs the SIGTERM its handler sees, then goes on waiting. Its memory faults run on
        their clock (a leak and the host pressure are per real second, whatever the engine does)."""
        told = False
        while True:
            self.engine.poll_only(TICK_S)
            self.engine.ballast.tick(time.monotonic())
            if self.engine.term.first_at is not None and not told:
                self.engine.log_term_trigger()
                told = True
