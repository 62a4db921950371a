"""The engine's startup as vLLM logs it (FACTS §2 rows 4-20, §3), with faults injected at phases.

Base durations at `--sim-speed 1` (seconds): loading 1.2, torch.compile 0.8, profiling 0.4,
KV cache 0.1, JIT warmup 0.2, capture 0.8 for 102 graphs (scaled by the graph count).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from enum import StrEnum

from launcher.sim import vllm_text
from launcher.sim.config import SimConfig
from launcher.sim.cudagraph import GraphMode
from launcher.sim.engine_config import engine_config_line
from launcher.sim.logline import LogWriter
from launcher.sim.memory import MemoryPlan
from launcher.sim.ranks import Ranks
from launcher.sim.versions import Dialect

DURATIONS = {"loading": 1.2, "compile": 0.8, "profiling": 0.4, "kv": 0.1, "warmup": 0.2, "capture": 0.8}


class Phase(StrEnum):
    LOADING = "loading"
    PROFILING = "profiling"
    CAPTURE = "capture"


class StartupFailed(Exception):
    """The engine fails to start; `last_line` ends its traceback, `rank` says which worker raised."""

    def __init__(self, last_line: str, rank: int | None = None) -> None:
        super().__init__(last_line)
        self.last_line = last_line
        self.rank = rank


class Startup:
    def __init__(
        self,
        cfg: SimConfig,
        dialect: Dialect,
        log: LogWriter,
        ranks: Ranks,
        wait: Callable[[float], None],
        hang: Callable[[], None],
    ) -> None:
        self.cfg = cfg
        self.d = dialect
        self.log = log
        self.ranks = ranks
        self.wait = wait
        self.hang = hang
        self.mem: MemoryPlan = cfg.memory()
        self.compile_s = 0.0

    def _t(self, name: str) -> float:
        return self.cfg.timing.scaled(DURATIONS[name])

    def _enter(self, phase: Phase) -> None:
        faults = self.cfg.faults
        if faults.hang_at == phase:
            self.hang()
        if faults.crash_at == phase:
            self.wait(self._t("kv"))
            raise StartupFailed(
                f"RuntimeError: [vllm-sim] injected crash during {phase} (--sim-crash-at {phase})"
            )

    def _marker(self, phase: str) -> None:
        marker = self.cfg.faults.marker
        if marker and self.cfg.faults.marker_phase == phase:
            self.ranks.log("INFO", self.d.src("marker"), lambda r: marker)

    def run(self) -> float:
        """Run every phase; returns the seconds `init engine ... took`."""
        start = time.monotonic()
        self.log.info(self.d.src("engine_config"), engine_config_line(self.cfg, self.d))
        self._init_device()
        self._load()
        self._compile()
        init_start = time.monotonic()
        self._profile()
        self._kv_cache()
        self._warmup()
        self._capture()
        took = time.monotonic() - init_start + self.compile_s
        suffix = f" (compilation: {self.compile_s:.2f} s)" if self.compile_s else ""
        self.log.info(
            self.d.src("init_done"),
            f"init engine (profile, create kv cache, warmup model) took {took:.2f} s{suffix}",
        )
        del start
        return took

    def _init_device(self) -> None:
        if self.d.runner == "V2":
            self.ranks.log("INFO", self.d.src("v2_runner"), lambda r: "Using V2 Model Runner")
        for rank in range(self.ranks.count):
            error = self.mem.free_memory_error(rank)
            if error:
                raise StartupFailed(error, rank if self.ranks.count > 1 else None)
        self.ranks.rename()
        if self.cfg.faults.gpu_allocate:
            self.ranks.hold_gpu(self.cfg.util)

    def _load(self) -> None:
        self._enter(Phase.LOADING)
        backends = "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']"
        self.ranks.log(
            "INFO",
            self.d.src("attn"),
            lambda r: f"Using FLASH_ATTN attention backend out of potential backends: {backends}.",
        )
        load = (
            "Loading model from scratch..."
            if self.d.runner == "V2"
            else f"Starting to load model {self.cfg.model}..."
        )
        self.ranks.log("INFO", self.d.src("load_start"), lambda r: load)
        t0 = time.monotonic()
        shards = max(1, math.ceil(self.mem.weights_gib * self.cfg.tp / 4))
        self.ranks.bar("Loading safetensors checkpoint shards", shards, self._t("loading"), shards=True)
        took = time.monotonic() - t0
        self.ranks.log("INFO", self.d.src("weights"), lambda r: f"Loading weights took {took:.2f} seconds")
        gib = self.mem.weights_gib
        self.ranks.log(
            "INFO",
            self.d.src("model_loaded"),
            lambda r: f"Model loading took {gib:.2f} GiB memory and {took + 0.05:.6f} seconds",
        )
        self._marker("loading")

    def _compile(self) -> None:
        if self.cfg.graphs.compile_mode == 0:
            return
        t0 = time.monotonic()
        tag = "[backbone] "
        self.ranks.log("INFO", self.d.src("compile_start"), lambda r: f"{tag}Starting torch.compile")
        self.ranks.log("INFO", self.d.src("compile_cache"), lambda r: vllm_text.compile_cache_dir(tag, r))
        self.wait(self._t("compile") / 3)
        dynamo = time.monotonic() - t0
        self.ranks.log(
            "INFO", self.d.src("dynamo"), lambda r: f"{tag}Dynamo bytecode transform time: {dynamo:.2f} s"
        )
        self.wait(self._t("compile") * 2 / 3)
        total = time.monotonic() - t0
        rng = f"(1, {self.cfg.max_num_batched_tokens})"
        self.ranks.log(
            "INFO",
            self.d.src("compile_range"),
            lambda r: f"{tag}Compiling a graph for compile range {rng} takes {total - dynamo:.2f} s",
        )
        self.ranks.log(
            "INFO", self.d.src("compile_total"), lambda r: f"{tag}torch.compile took {total:.2f} s in total"
        )
        self.compile_s = total

    def _profile(self) -> None:
        self._enter(Phase.PROFILING)
        plan = self.cfg.graphs
        pieces, fulls = plan.piecewise_sizes, plan.full_sizes
        if plan.mode == GraphMode.NONE:
            self.wait(self._t("profiling"))
            return
        if self.d.runner == "V1":
            largest = max(plan.sizes)
            self.ranks.log(
                "INFO",
                self.d.src("cg_profile"),
                lambda r: (
                    f"Profiling CUDA graph memory: PIECEWISE={len(pieces)} (largest={largest}), "
                    f"FULL={len(fulls)} (largest={max(fulls) if fulls else 0})"
                ),
            )
            self.wait(self._t("profiling"))
            graph = self.mem.graph_gib
            self.ranks.log(
                "INFO",
                self.d.src("cg_estimate"),
                lambda r: f"Estimated CUDA graph memory: {graph:.2f} GiB total",
            )
            return
        # V2 runs a real capture before the KV cache exists: all PIECEWISE graphs, the 2 largest FULL ones.
        t0 = time.monotonic()
        if pieces:
            self.ranks.bar("Capturing CUDA graphs (PIECEWISE)", len(pieces), self._t("profiling") * 0.7)
        if fulls:
            self.ranks.bar("Capturing CUDA graphs (FULL)", min(2, len(fulls)), self._t("profiling") * 0.3)
        secs = time.monotonic() - t0
        graph = self.mem.graph_gib
        self.ranks.log(
            "INFO",
            self.d.src("cg_done"),
            lambda r: f"Graph capturing finished in {secs:.0f} secs, took {graph:.2f} GiB",
        )

    def _kv_cache(self) -> None:
        error = self.mem.kv_error()
        if error:
            raise StartupFailed(error)
        kv = self.mem.kv_gib
        self.ranks.log("INFO", self.d.src("kv_avail"), lambda r: f"Available KV cache memory: {kv:.2f} GiB")
        if self.cfg.graphs.mode != GraphMode.NONE and self.d.runner == "V2":
            delta = self.mem.graph_gib / self.mem.total_gib
            util = self.cfg.util
            self.ranks.log(
                "INFO", self.d.src("cg_note"), lambda r: vllm_text.cudagraph_profiler_note(util, delta)
            )
        self.wait(self._t("kv"))
        for key, text in vllm_text.kv_size_lines(
            self.d.kv_one_line, self.mem.kv_tokens, self.cfg.max_model_len, self.mem.concurrency
        ):
            self.log.info(self.d.src(key), text)

    def _warmup(self) -> None:
        if self.cfg.enforce_eager:
            self._marker("warmup")
            return
        self.ranks.log("INFO", self.d.src("jit_start"), lambda r: "JIT kernel warmup starting.")
        t0 = time.monotonic()
        self.wait(self._t("warmup"))
        secs = time.monotonic() - t0
        self.ranks.log(
            "INFO", self.d.src("jit_done"), lambda r: f"JIT kernel warmup finished in {secs:.2f}s."
        )
        self._marker("warmup")

    def _capture(self) -> None:
        self._enter(Phase.CAPTURE)
        plan = self.cfg.graphs
        if self.cfg.enforce_eager:
            return  # capture_model is not called at all (FACTS §3.7)
        if plan.mode == GraphMode.NONE:
            text = vllm_text.capture_skipped(self.d.runner)
            self.ranks.log("WARNING", self.d.src("cg_skip"), lambda r: text)
            return
        pieces, fulls = plan.piecewise_sizes, plan.full_sizes
        scale = self._t("capture") * (len(pieces) + len(fulls)) / 102
        t0 = time.monotonic()
        labels = (
            ("mixed prefill-decode, PIECEWISE", "decode, FULL")
            if self.d.runner == "V1"
            else ("PIECEWISE", "FULL")
        )
        for label, sizes in zip(labels, (pieces, fulls), strict=True):
            if not sizes:
                continue
            if self.cfg.faults.oom_at_capture:
                self.ranks.bar(f"Capturing CUDA graphs ({label})", len(sizes) // 2 or 1, scale / 2)
                oom = vllm_text.cuda_oom(self.mem.total_gib, self.mem.requested_gib + 0.4)
                raise StartupFailed(oom, 0 if self.ranks.count > 1 else None)
            self.ranks.bar(
                f"Capturing CUDA graphs ({label})",
                len(sizes),
                scale * len(sizes) / (len(pieces) + len(fulls)),
            )
        secs = time.monotonic() - t0
        graph = self.mem.graph_gib
        self.ranks.log(
            "INFO",
            self.d.src("cg_done"),
            lambda r: f"Graph capturing finished in {secs:.0f} secs, took {graph:.2f} GiB",
        )
        if self.d.runner == "V2":
            self.ranks.log("INFO", self.d.src("cg_pool"), lambda r: vllm_text.graph_pool(graph))
