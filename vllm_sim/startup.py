"""The engine's startup as vLLM logs it (vllm-facts.md §2 rows 4-20, §3), with faults injected at phases.

Base durations at `--sim-speed 1` (seconds): loading 1.2, torch.compile 0.8, profiling 0.4,
KV cache 0.1, JIT warmup 0.2, capture 0.8 for 102 graphs (scaled by the graph count).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from enum import StrEnum

from vllm_sim import notes, vllm_text
from vllm_sim.config import SimConfig
from vllm_sim.cudagraph import GraphMode
from vllm_sim.engine_config import engine_config_line
from vllm_sim.logline import LogWriter
from vllm_sim.memory import MemoryPlan
from vllm_sim.ranks import Ranks
from vllm_sim.versions import Dialect


class Phase(StrEnum):
    LOADING = "loading"
    PROFILING = "profiling"
    CAPTURE = "capture"


class StartupFailed(Exception):
    """The engine fails to start; `last_line` ends its traceback, `rank` says which worker raised,
    `where` names the raise site (`free_memory`, `kv_cache`) for the dialect's traceback frames."""

    def __init__(self, last_line: str, rank: int | None = None, where: str = "") -> None:
        super().__init__(last_line)
        self.last_line = last_line
        self.rank = rank
        self.where = where


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
        self.runner = cfg.runner
        self.plan = cfg.captured  # what the runner captures; the config line shows cfg.graphs
        # Whether the runner estimated graph memory before the KV cache (profiler note, pool line).
        self.estimated = self.runner == "V1" or dialect.v2_profile_capture

    def _t(self, name: str) -> float:
        return self.cfg.timing.startup(name)

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
        self.wait(self._t("spawn"))  # the engine process's imports before it logs its config
        self.log.info(self.d.src("engine_config"), engine_config_line(self.cfg, self.d))
        if self.d.notes:
            notes.runner_fallback(self.log, self.cfg, self.d)
        self._init_device()
        self._load()
        self._compile()
        init_start = time.monotonic()
        self._profile()
        self._kv_cache()
        self._warmup()
        self._capture()
        self.wait(self._t("settle"))
        took = time.monotonic() - init_start + self.compile_s
        suffix = f" (compilation: {self.compile_s:.2f} s)" if self.compile_s else ""
        self.log.info(
            self.d.src("init_done" if self.compile_s else "init_done_plain"),
            f"init engine (profile, create kv cache, warmup model) took {took:.2f} s{suffix}",
        )
        if self.d.notes:
            notes.scheduling(self.log, self.cfg, self.d, api=False)
        del start
        return took

    def _init_device(self) -> None:
        if self.d.notes:
            notes.device(self.ranks, self.cfg, self.d)
        if self.runner == "V2":
            self.ranks.log("INFO", self.d.src("v2_runner"), lambda r: "Using V2 Model Runner")
        for rank in range(self.ranks.count):
            error = self._device_memory(rank).free_memory_error(rank, self.d.gib)
            if error:
                raise StartupFailed(error, rank if self.ranks.count > 1 else None, "free_memory")
        self.ranks.rename()
        if self.cfg.faults.gpu_allocate or self.cfg.gpu_set:
            self.ranks.hold_gpu(self.cfg.util)

    def _device_memory(self, rank: int) -> MemoryPlan:
        """What `request_memory` reads on this rank's device: the simulated set's free and total now
        (`--sim-gpu-set`), else the flags' figures."""
        if not self.cfg.gpu_set:
            return self.mem
        from basis.simgpus import SimGpuError
        from vllm_sim.gpu_set import free_gib

        try:
            free, total = free_gib(self.cfg.gpu_set, self.cfg.gpu_devices[rank])
        except SimGpuError as err:
            raise StartupFailed(f"RuntimeError: [vllm-sim] --sim-gpu-set: {err}") from None
        return dataclasses.replace(
            self.mem, free_gib=free, total_gib=total, requested_gib=self.cfg.util * total
        )

    def _log(self, level: str, event: str, text: str) -> None:
        """One line from every rank, the same text on each."""
        self.ranks.log(level, self.d.src(event, self.runner), lambda r: text)

    def _load(self) -> None:
        self._enter(Phase.LOADING)
        backends = (
            "['FLASH_ATTN', 'TRITON_ATTN', 'FLEX_ATTENTION']"
            if self.d.notes
            else "['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']"
        )
        attn = f"Using FLASH_ATTN attention backend out of potential backends: {backends}."
        load = (
            "Loading model from scratch..."
            if self.runner == "V2"
            else f"Starting to load model {self.cfg.model}..."
        )
        if self.d.notes:  # 0.26 announces the load first, then the backend
            self._log("INFO", "load_start", load)
            self._log("INFO", "attn", attn)
            notes.attention(self.ranks, self.mem, self.d)
        else:
            self._log("INFO", "attn", attn)
            self._log("INFO", "load_start", load)
        t0 = time.monotonic()
        shards = max(1, math.ceil(self.mem.weights_gib * self.cfg.tp / 4))
        self.ranks.bar("Loading safetensors checkpoint shards", shards, self._t("loading"), shards=True)
        if self.d.shard_bar_lines:
            self.log.raw("")  # then one empty prefixed line on stderr (0.26.0)
        took = time.monotonic() - t0
        self._log("INFO", "weights", f"Loading weights took {took:.2f} seconds")
        if self.d.notes and self.runner == "V1" and self.cfg.spec_method:
            self._log("INFO", "drafter", "Loading drafter model...")
        self._log(
            "INFO", "model_loaded", self.d.model_loaded_line(self.runner, self.mem.weights_gib, took + 0.05)
        )
        if self.d.notes and self.runner == "V2":
            notes.sampler(self.ranks, self.d)
        self._marker("loading")

    def _compile(self) -> None:
        if self.cfg.graphs.compile_mode == 0:
            return
        t0 = time.monotonic()
        tag = self.d.compile_tag
        if self.d.compile_start_line:
            self._log("INFO", "compile_start", f"{tag}Starting torch.compile")
        self.ranks.log("INFO", self.d.src("compile_cache"), lambda r: vllm_text.compile_cache_dir(tag, r))
        self.wait(self._t("compile") / 3)
        dynamo = time.monotonic() - t0
        self._log("INFO", "dynamo", f"{tag}Dynamo bytecode transform time: {dynamo:.2f} s")
        self.wait(self._t("compile") * 2 / 3)
        total = time.monotonic() - t0
        if self.d.notes:
            notes.compile_lines(self.ranks, self.cfg, self.d, total - dynamo)
        else:
            rng = f"(1, {self.cfg.max_num_batched_tokens})"
            self._log(
                "INFO",
                "compile_range",
                f"{tag}Compiling a graph for compile range {rng} takes {total - dynamo:.2f} s",
            )
        self._log("INFO", "compile_total", f"{tag}torch.compile took {total:.2f} s in total")
        if self.d.notes:
            self._log(
                "INFO", "warmup_run", f"Initial profiling/warmup run took {self._t('profiling') / 2:.2f} s"
            )
        self.compile_s = total

    def _profile(self) -> None:
        self._enter(Phase.PROFILING)
        plan = self.plan
        pieces, fulls = plan.piecewise_sizes, plan.full_sizes
        if plan.mode == GraphMode.NONE or not self.estimated:
            self.wait(self._t("profiling"))
            return
        if self.runner == "V1":
            text = (
                f"Profiling CUDA graph memory: PIECEWISE={len(pieces)} (largest={max(pieces, default=0)}), "
                f"FULL={len(fulls)} (largest={max(fulls, default=0)})"
            )
            self._log("INFO", "cg_profile", text)
            self.wait(self._t("profiling"))
            self._log(
                "INFO", "cg_estimate", f"Estimated CUDA graph memory: {self.mem.graph_gib:.2f} GiB total"
            )
            return
        # 0.33's V2 captures once before the KV cache exists: all PIECEWISE graphs, the 2 largest FULL.
        t0 = time.monotonic()
        if pieces:
            self.ranks.bar("Capturing CUDA graphs (PIECEWISE)", len(pieces), self._t("profiling") * 0.7)
        if fulls:
            self.ranks.bar("Capturing CUDA graphs (FULL)", min(2, len(fulls)), self._t("profiling") * 0.3)
        secs = time.monotonic() - t0
        self._log(
            "INFO",
            "cg_done",
            f"Graph capturing finished in {secs:.0f} secs, took {self.mem.graph_gib:.2f} GiB",
        )

    def _kv_cache(self) -> None:
        if self.cfg.kv_cache_memory_bytes is not None:
            self._log("INFO", "kv_given", vllm_text.kv_given(self.mem, self.d.gib))
        error = self.mem.kv_error()
        if error:
            raise StartupFailed(error, where="kv_cache")
        self._log("INFO", "kv_avail", f"Available KV cache memory: {self.mem.kv_gib:.2f} GiB")
        if self.plan.mode != GraphMode.NONE and self.estimated:
            delta = self.mem.graph_gib / self.mem.total_gib
            self._log("INFO", "cg_note", vllm_text.cudagraph_profiler_note(self.cfg.util, delta))
        self.wait(self._t("kv"))
        for key, text in vllm_text.kv_size_lines(
            self.d.kv_one_line, self.mem.kv_tokens, self.cfg.max_model_len, self.mem.concurrency
        ):
            self.log.info(self.d.src(key), text)
        if self.d.notes:
            notes.cutedsl(self.ranks, self.d)

    def _warmup(self) -> None:
        if self.cfg.enforce_eager or not self.d.jit_warmup:
            self._marker("warmup")
            return
        self._log("INFO", "jit_start", "JIT kernel warmup starting.")
        t0 = time.monotonic()
        self.wait(self._t("warmup"))
        self._log("INFO", "jit_done", f"JIT kernel warmup finished in {time.monotonic() - t0:.2f}s.")
        self._marker("warmup")

    def _capture(self) -> None:
        self._enter(Phase.CAPTURE)
        self._graphs()
        if self.d.notes:
            notes.memory_summary(self.ranks, self.mem, self.cfg.util, self.d)

    def _graphs(self) -> None:
        plan = self.plan
        if self.cfg.enforce_eager:
            return  # capture_model is not called at all (vllm-facts.md §3.7)
        if plan.mode == GraphMode.NONE:
            # 0.26 has only the V1 wording, for both runners (scripts/real-vllm/README.md)
            self._log("WARNING", "cg_skip", vllm_text.capture_skipped("V1" if self.d.notes else self.runner))
            return
        if self.d.notes and self.runner == "V1":
            self._log("INFO", "torch_profiler", "Rank 0: Torch profiler disabled for CUDA graph capture")
        pieces, fulls = plan.piecewise_sizes, plan.full_sizes
        scale = self._t("capture") * (len(pieces) + len(fulls)) / 102
        t0 = time.monotonic()
        labels = (
            ("mixed prefill-decode, PIECEWISE", "decode, FULL")
            if self.runner == "V1"
            else ("PIECEWISE", "FULL")
        )
        for label, sizes in zip(labels, (pieces, fulls), strict=True):
            if not sizes:
                continue
            if self.cfg.faults.oom_at_capture:
                self.ranks.bar(f"Capturing CUDA graphs ({label})", len(sizes) // 2 or 1, scale / 2)
                oom = vllm_text.cuda_oom(self.mem.total_gib, self.mem.requested_gib + 0.4)
                raise StartupFailed(oom, 0 if self.ranks.count > 1 else None)
            share = scale * len(sizes) / (len(pieces) + len(fulls))
            self.ranks.bar(f"Capturing CUDA graphs ({label})", len(sizes), share)
        secs = time.monotonic() - t0
        graph = self.mem.graph_gib
        self._log("INFO", "cg_done", f"Graph capturing finished in {secs:.0f} secs, took {graph:.2f} GiB")
        if self.estimated:
            self._log("INFO", "cg_pool", vllm_text.graph_pool(graph, rounded=self.d.notes))
