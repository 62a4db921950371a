"""The engine core's sleep mode, as vLLM 0.26.0 runs it (vllm-facts.md §12): the scheduler's pause,
the executor's sleeping tags, the memory each level frees, and the lines each step logs.

Level 0 only pauses the scheduler. Level 1 offloads the weights to host memory and drops the KV
cache; level 2 drops both (after waking, the weights are garbage until `reload_weights`). Only
what lives in the CuMem pool is freed, and that pool exists only with `--enable-sleep-mode`:
without it a sleep "succeeds" and frees nothing. What stays on the GPU is the residue (CUDA
context, graph pool), measured at 926 MiB (tiny model) and 1,656 MiB (5.29 GiB of weights).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from vllm_sim import timing
from vllm_sim.config import SimConfig
from vllm_sim.logline import LogWriter
from vllm_sim.memory import MemoryPlan
from vllm_sim.ranks import Ranks
from vllm_sim.tracebacks import (
    CUMEM_MAP_026,
    SLEEP_MODE_026,
    WAKE_UP_026,
    WAKE_UP_TP_026,
    Frame,
    traceback_text,
)
from vllm_sim.versions import Dialect

RESIDUE_MIN_GIB = 926 / 1024  # the tiny model's residue on the H200
RESIDUE_MAX_GIB = 1656 / 1024  # the 2.84 B model's: not extrapolated beyond what was measured
RESIDUE_GIB_PER_WEIGHT_GIB = (RESIDUE_MAX_GIB - RESIDUE_MIN_GIB) / timing.MEASURED_WEIGHTS_GIB
PAUSE_MODES = ("keep", "abort", "wait")
ALL_TAGS = ("weights", "kv_cache")


class UtilityFailed(Exception):
    """A utility call raised inside the engine core; the API server gets `str()` of it."""


def residue_gib(weights_gib: float) -> float:
    return min(RESIDUE_MIN_GIB + RESIDUE_GIB_PER_WEIGHT_GIB * weights_gib, RESIDUE_MAX_GIB)


@dataclass(frozen=True, slots=True)
class SleepFigures:
    """One GPU at the end of a sleep, in GiB."""

    pool: float  # what the CuMem pool held: weights + KV cache (0 without --enable-sleep-mode)
    backed_up: float  # of it, copied to host memory (level 1: the weights)
    freed: float  # what the device's free memory grew by
    resident: float  # what this engine still holds
    in_use: float  # the device's used memory, other processes' included


def sleep_figures(plan: MemoryPlan, level: int, pooled: bool) -> SleepFigures:
    held = plan.requested_gib
    others = max(0.0, plan.total_gib - plan.free_gib)
    if not pooled:
        return SleepFigures(0.0, 0.0, 0.0, held, others + held)
    # The measured residue wins over the memory model's non-pool share (its 0.3 GiB context is
    # less than a real one); the pool line never claims more than the device got back.
    resident = min(residue_gib(plan.weights_gib), held)
    freed = held - resident
    pool = min(plan.weights_gib + max(0.0, plan.kv_gib), freed)
    backed = min(plan.weights_gib, pool) if level == 1 else 0.0
    return SleepFigures(pool, backed, freed, resident, others + resident)


class SleepMode:
    """The engine core's side of `/sleep`, `/wake_up`, `/is_sleeping`, `/collective_rpc`.

    `busy(s)` spends engine time (nothing else runs meanwhile, as in vLLM's busy loop);
    `hold_gpu(gib)` resizes whatever stands for this engine's GPU memory (None: all of it again),
    and says why a wake found no room (CUDA's words), else None.
    """

    def __init__(
        self,
        cfg: SimConfig,
        dialect: Dialect,
        log: LogWriter,
        ranks: Ranks,
        busy: Callable[[float], None],
        hold_gpu: Callable[[float | None], str | None],
    ) -> None:
        self.cfg, self.d, self.log, self.ranks = cfg, dialect, log, ranks
        self.busy, self.hold_gpu = busy, hold_gpu
        self.plan = cfg.memory()
        self.paused = False
        self.asleep: set[str] = set()  # the executor's sleeping tags
        self.level = 0
        self.weights_valid = True
        self.slept_once = False
        self.backend_named = False

    @property
    def is_sleeping(self) -> bool:
        return self.paused or bool(self.asleep)

    def resident_gib(self, asleep: set[str] | None = None) -> float:
        """What this engine holds on each GPU with `asleep` (default: the tags asleep now) asleep."""
        asleep = self.asleep if asleep is None else asleep
        if not asleep:
            return self.plan.requested_gib
        figures = sleep_figures(self.plan, self.level, self.cfg.sleep_mode)
        back = 0.0
        if self.cfg.sleep_mode and "weights" not in asleep:
            back += self.plan.weights_gib
        if self.cfg.sleep_mode and "kv_cache" not in asleep:
            back += max(0.0, self.plan.kv_gib)
        return figures.resident + back

    def _fail(self, method: str, frames: tuple[Frame, ...], last: str, message: str) -> UtilityFailed:
        text = f"Invocation of {method} method failed\n" + traceback_text(frames, last)
        self.log.error(self.d.src("utility_failed"), text)
        return UtilityFailed(f"Call to {method} method failed: {message}")

    def pause(self, level: int, mode: str, running: int, waiting: int) -> None:
        """`EngineCore.sleep`'s first half: the scheduler's pause (its ValueError for a bad mode).

        The pause completes at once only when the engine has no work left (0.26.0
        `v1/engine/core.py:1764-1800`): `abort` leaves the requests it finished to one more step
        (finished, not yet cleared), `wait` the running ones to their end, `keep` nothing (a fully
        paused scheduler counts no request). Otherwise a sleep from level 1 on says it waits."""
        if mode not in PAUSE_MODES:
            message = f"Invalid pause mode: {mode}"
            raise self._fail("sleep", SLEEP_MODE_026, f"ValueError: {message}", message)
        self.paused = True
        pending = (mode == "abort" and running + waiting > 0) or (mode == "wait" and running > 0)
        if level >= 1 and pending:
            self.log.info(
                self.d.src("sleep_wait"), "Waiting for in-flight requests to complete before sleeping..."
            )

    def sleep(self, level: int) -> None:
        """`Executor.sleep`: nothing for level 0; a warning when already asleep."""
        if level < 1:
            return
        if self.asleep:
            self.log.warning(self.d.src("already_asleep"), "Executor is already sleeping.")
            return
        started = time.perf_counter()
        weights = self.plan.weights_gib if self.cfg.sleep_mode else 0.0
        self.busy(timing.sleep_seconds(weights, level, not self.slept_once, self.cfg.timing))
        self._worker_sleep_lines(level)
        self.slept_once = self.slept_once or level == 1
        self.asleep, self.level = set(ALL_TAGS), level
        if level >= 2:
            self.weights_valid = False
        self.hold_gpu(self.resident_gib())
        self.log.info(
            self.d.src("fell_asleep"), f"It took {time.perf_counter() - started:.6f} seconds to fall asleep."
        )

    def _worker_sleep_lines(self, level: int) -> None:
        f = sleep_figures(self.plan, level, self.cfg.sleep_mode)
        if not self.backend_named:
            self.ranks.log("INFO", self.d.src("sleep_backend"), lambda r: "Using sleep-mode backend: cumem")
            self.backend_named = True
        pool_line = (
            f"CuMemAllocator: sleep freed {f.pool:.2f} GiB memory in total, of which {f.backed_up:.2f} GiB "
            f"is backed up in CPU and the rest {f.pool - f.backed_up:.2f} GiB is discarded directly."
        )
        self.ranks.log("INFO", self.d.src("cumem_sleep"), lambda r: pool_line)
        freed = (
            f"Sleep mode freed {self.d.gib(f.freed)} GiB memory, {self.d.gib(f.in_use)} GiB memory is "
            "still in use."
        )
        self.ranks.log("INFO", self.d.src("sleep_freed"), lambda r: freed)

    def wake_up(self, tags: list[str] | None) -> bool:
        """`EngineCore.wake_up`; True when the scheduler resumes (nothing is asleep any more)."""
        if tags is not None and "scheduling" in tags:
            tags = [t for t in tags if t != "scheduling"]
        if tags is None or tags:
            self._executor_wake(tags)
        if not self.asleep:
            self.paused = False
        return not self.paused

    def _executor_wake(self, tags: list[str] | None) -> None:
        if not self.asleep:
            self.log.warning(self.d.src("not_asleep"), "Executor is not sleeping.")
            return
        for tag in tags or ():
            if tag not in self.asleep:
                self.log.warning(
                    self.d.src("tag_not_asleep"), f"Tag {tag} is not in sleeping tags {tag_set(self.asleep)}"
                )
                return
        if self.cfg.faults.wake_fault == "fail":
            last = "RuntimeError: [vllm-sim] injected wake-up failure (--sim-wake-fault fail)"
            raise self._fail("wake_up", WAKE_UP_026, last, last.split(": ", 1)[1])
        if self.cfg.faults.wake_fault == "garbage" and "weights" in (tags or self.asleep):
            self.weights_valid = False  # woken, but the weights came back wrong: every answer is garbage
        started = time.perf_counter()
        waking = set(tags) if tags else set(self.asleep)
        weights_back = "weights" in waking and self.level == 1 and self.cfg.sleep_mode
        self.busy(timing.wake_seconds(self.plan.weights_gib, weights_back, self.cfg.timing.speed))
        shown = tags if tags else tag_set(self.asleep)
        remaining = self.asleep - waking
        no_room = self.hold_gpu(self.resident_gib(remaining) if remaining else None)
        if no_room:
            raise self._wake_oom(no_room)
        self.asleep = remaining
        self.log.info(
            self.d.src("woke_up"),
            f"It took {time.perf_counter() - started:.6f} seconds to wake up tags {shown}.",
        )

    def _wake_oom(self, error: str) -> UtilityFailed:
        """The pool found no room on the GPU (vllm-facts.md §16): the tags stay asleep. With TP 1 the C
        extension's line, then the engine's traceback; with TP > 1 the worker said it, the
        executor raises its own RuntimeError."""
        if self.ranks.count == 1:
            self.log.native(error)
            return self._fail("wake_up", (*WAKE_UP_026, *CUMEM_MAP_026), f"RuntimeError: {error}", error)
        message = f"Worker failed with error '{error}', please check the stack trace above for the root cause"
        return self._fail("wake_up", WAKE_UP_TP_026, f"RuntimeError: {message}", message)

    def reload_weights(self) -> list[None]:
        """`collective_rpc("reload_weights")`: the weights from disk again (a loading phase's time)."""
        self.busy(self.cfg.timing.startup("loading"))
        self.weights_valid = True
        return [None] * self.ranks.count


def tag_set(tags: set[str]) -> str:
    """The executor's `sleeping_tags` as Python prints the set (in a fixed order here)."""
    return "{" + ", ".join(repr(t) for t in ALL_TAGS if t in tags) + "}"
