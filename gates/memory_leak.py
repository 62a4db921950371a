"""memory_leak: drive representative traffic through N windows while sampling the memory of the
engine's whole process tree (RSS, and GPU memory per process where NVML exists), then apply the
leak rule (gates/leak_rule.py). Reports the series either way.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from basis.setting import Setting
from gates.base import GateBase, Need
from gates.context import GateContext, interruption
from gates.leak_rule import LeakJudgement, LeakRule, judge
from gates.outcome import Outcome
from gates.traffic import chat_request

MIB = 1024 * 1024


class MemoryLeakGate(GateBase):
    name = "memory_leak"
    NEEDS: ClassVar[frozenset[Need]] = frozenset({Need.HTTP, Need.PROCESSES, Need.LOAD})
    TIMEOUT_NOTE = "windows × window_s × 1.5 + 60"
    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting(
            "windows",
            int,
            6,
            "Number of measurement windows (≥ baseline_window + consecutive).",
            minimum=2,
            maximum=1000,
        ),
        Setting("window_s", (int, float), 20.0, "Length of one window.", unit="s", minimum=0.1, maximum=3600),
        Setting(
            "baseline_window",
            int,
            2,
            "Window whose end is the baseline (warm-up growth before it is ignored).",
            minimum=1,
            maximum=100,
        ),
        Setting("consecutive", int, 3, "Growing windows in a row that make a leak.", minimum=1, maximum=100),
        Setting(
            "min_growth_mib",
            (int, float),
            1024.0,
            "Total growth over the baseline that makes a leak.",
            unit="MiB",
            minimum=1,
            maximum=1e7,
        ),
        Setting("concurrency", int, 4, "Parallel request streams while measuring.", minimum=1, maximum=256),
        Setting(
            "prompt_paragraphs",
            int,
            40,
            "Prompt length in paragraphs (≈ 45 tokens each).",
            minimum=1,
            maximum=5000,
        ),
        Setting("max_tokens", int, 128, "Tokens asked per request.", minimum=1, maximum=1_000_000),
    )

    def __init__(self, table: dict[str, Any] | None = None) -> None:
        super().__init__(table)
        self.rule = LeakRule(
            baseline_window=int(self.setting("baseline_window")),
            consecutive=int(self.setting("consecutive")),
            min_growth_mib=float(self.setting("min_growth_mib")),
        )
        if "timeout_s" not in self.table:
            self.timeout_s = int(self.setting("windows")) * float(self.setting("window_s")) * 1.5 + 60

    @classmethod
    def table_problems(cls, table: Mapping[str, Any]) -> list[str]:
        values = {s.name: table.get(s.name, s.default) for s in cls.SETTINGS}
        try:
            needed = int(values["baseline_window"]) + int(values["consecutive"])
            windows = int(values["windows"])
        except (TypeError, ValueError):
            return []  # a wrong type is reported by the declaration
        if windows < needed:
            return [f"windows = {windows} is too few: baseline_window + consecutive = {needed}"]
        return []

    def check(self, ctx: GateContext) -> Outcome:
        windows = int(self.setting("windows"))
        if windows < self.rule.windows_needed:
            return Outcome.failed(
                f"windows = {windows} is too few: the rule needs {self.rule.windows_needed}"
            )
        models = ctx.http.get("/v1/models", 10.0)
        if models.status != 200:
            return Outcome.not_yet(f"/v1/models answered {models.status or models.error}")
        model = models.json()["data"][0]["id"]
        traffic = _Traffic(ctx, model, self)
        rss, gpu = traffic.measure(windows, float(self.setting("window_s")))
        if traffic.interrupted is not None:
            return Outcome.failed(
                f"{traffic.interrupted} after {len(rss)} of {windows} windows: no verdict",
                rss_mib=rss,
                requests={"completed": traffic.completed, "failed": traffic.failed},
            )
        if (gap := _gap(rss, gpu)) is not None:
            return Outcome.failed(f"{gap}: a series with gaps is never a pass", rss_mib=rss, gpu_mib=gpu)
        if traffic.completed == 0:
            return Outcome.failed(
                f"no request succeeded ({traffic.failed} failed): no data, no verdict", rss_mib=rss
            )
        return self._verdict(rss, gpu, traffic)

    def _verdict(self, rss: list[float], gpu: list[float] | None, traffic: _Traffic) -> Outcome:
        judged = {"rss": judge(rss, self.rule)}
        if gpu is not None:
            judged["gpu"] = judge(gpu, self.rule)
        evidence: dict[str, Any] = {
            "rss_before_traffic_mib": round(traffic.rss_before_mib, 1),
            "rss_mib": [round(v, 1) for v in rss],
            "gpu_mib": [round(v, 1) for v in gpu] if gpu is not None else None,
            "requests": {"completed": traffic.completed, "failed": traffic.failed},
            "rule": {
                "baseline_window": self.rule.baseline_window,
                "consecutive": self.rule.consecutive,
                "min_growth_mib": self.rule.min_growth_mib,
            },
        }
        leaks = {kind: j for kind, j in judged.items() if j.leak}
        if leaks:
            return Outcome.failed("; ".join(f"{k} leak: {j.reason}" for k, j in leaks.items()), **evidence)
        return Outcome.passed(_describe(judged), **evidence)


def _gap(rss: list[float], gpu: list[float] | None) -> str | None:
    """A zero in the series means the process tree was empty (or gone) when sampled."""
    if zeros := [i + 1 for i, v in enumerate(rss) if v <= 0]:
        return f"rss was 0 MiB at the end of window(s) {zeros}"
    if gpu and any(v > 0 for v in gpu) and (zeros := [i + 1 for i, v in enumerate(gpu) if v <= 0]):
        return f"GPU memory was 0 MiB at the end of window(s) {zeros}"
    return None


def _describe(judged: dict[str, LeakJudgement]) -> str:
    return "; ".join(f"{kind}: {j.reason}" for kind, j in judged.items())


class _Traffic:
    """Request streams running while the main thread samples memory at each window's end."""

    def __init__(self, ctx: GateContext, model: str, gate: MemoryLeakGate) -> None:
        self.ctx, self.model, self.gate = ctx, model, gate
        self.completed = self.failed = 0
        self.rss_before_mib = 0.0
        self.interrupted: str | None = None  # why the windows ended early (engine gone, stop asked)
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def measure(self, windows: int, window_s: float) -> tuple[list[float], list[float] | None]:
        streams = int(self.gate.setting("concurrency"))
        rss: list[float] = []
        gpu: list[float] | None = []
        # Memory before any traffic: the warm-up growth the rule deliberately ignores shows against it.
        self.rss_before_mib = self.ctx.memory.rss_bytes(self.ctx.server.process_tree()) / MIB
        with ThreadPoolExecutor(max_workers=streams, thread_name_prefix="leak-traffic") as pool:
            for stream in range(streams):
                pool.submit(self._stream, stream, streams)
            try:
                # Each window ends window_s after the previous sample, not on a fixed grid: a sample
                # a busy host took late must not leave the next window near empty (two samples a
                # moment apart show no growth, and a real leak would pass as "no leak").
                sampled = self.ctx.clock.monotonic()
                for _ in range(windows):
                    self.interrupted = self._wait_until(sampled + window_s)
                    if self.interrupted is not None:
                        break
                    sampled = self.ctx.clock.monotonic()
                    pids: Sequence[int] = self.ctx.server.process_tree()
                    rss.append(self.ctx.memory.rss_bytes(pids) / MIB)
                    used = self.ctx.memory.gpu_bytes(pids)
                    gpu = None if used is None or gpu is None else [*gpu, used / MIB]
            finally:
                self._stop.set()
        return rss, gpu

    def _wait_until(self, when: float) -> str | None:
        """Sleep to the window's end in short steps, watching the engine and the stop request."""
        while (why := interruption(self.ctx)) is None:
            left = when - self.ctx.clock.monotonic()
            if left <= 0:
                return None
            self.ctx.clock.sleep(min(left, 0.1))
        return why

    def _stream(self, stream: int, streams: int) -> None:
        index = stream
        while not self._stop.is_set() and interruption(self.ctx) is None:
            body = chat_request(
                self.model,
                index,
                paragraphs=int(self.gate.setting("prompt_paragraphs")),
                max_tokens=int(self.gate.setting("max_tokens")),
            )
            reply = self.ctx.http.post_json("/v1/chat/completions", body, 120.0)
            with self._lock:
                if reply.status == 200:
                    self.completed += 1
                else:
                    self.failed += 1
            if reply.status == 0 and not self.ctx.server.alive():
                return
            if reply.status != 200:
                self.ctx.clock.sleep(0.2)  # a failing server is not hammered in a tight loop
            index += streams
