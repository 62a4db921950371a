"""Measure one arm: a short warm-up, then the bench `runs` times, each run in its own folder.

The bench (launcher/bench) does the measuring and the trap detection; this only sequences it and
keeps each run's summary JSON, which is what the comparison reads. A stop request (SIGINT/SIGTERM
to the probe) cancels the run in flight within a tenth of a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from launcher.bench.client import Client
from launcher.bench.options import BenchOptions
from launcher.bench.progress import Progress
from launcher.bench.report import RecordSink, write_summary
from launcher.bench.runner import Runner
from launcher.bench.target import Endpoint, Target, discover
from launcher.bench.workload import ContextSpec, Workload
from launcher.errors import GateError

T = TypeVar("T")
WARMUP_CONTEXT = ContextSpec("short", 0)


class Interrupted(GateError):
    """The probe was asked to stop (SIGINT/SIGTERM) while measuring."""


@dataclass(frozen=True, slots=True)
class Measurement:
    summaries: tuple[dict[str, Any], ...]  # one bench summary per run, in order
    warmup_s: float
    folder: Path


class Measure(Protocol):
    """The seam the probe measures through (tests pass one that fails on purpose)."""

    def __call__(self, arm: str, endpoint: Endpoint) -> Measurement: ...


@dataclass(frozen=True, slots=True)
class BenchMeasure:
    options: BenchOptions
    runs: int
    warmup_requests: int
    out_dir: Path
    probe_id: str
    stop: threading.Event

    def __call__(self, arm: str, endpoint: Endpoint) -> Measurement:
        folder = self.out_dir / f"arm-{arm}"
        return _until_stopped(self._measure(arm, endpoint, folder), self.stop)

    async def _measure(self, arm: str, endpoint: Endpoint, folder: Path) -> Measurement:
        summaries: list[dict[str, Any]] = []
        async with Client(
            endpoint.base_url, api_key=endpoint.api_key, read_timeout_s=self.options.request_timeout_s
        ) as client:
            target = await discover(client, endpoint)
            began = time.monotonic()
            if self.warmup_requests > 0:
                await self._warm_up(client, target, arm)
            warmup_s = time.monotonic() - began
            for run in range(1, self.runs + 1):
                summaries.append(await self._run(client, target, arm, run, folder / f"run-{run}"))
        (folder / "runs.json").write_text(
            json.dumps([str(folder / f"run-{k}" / "summary.json") for k in range(1, len(summaries) + 1)])
            + "\n"
        )
        return Measurement(tuple(summaries), warmup_s, folder)

    async def _warm_up(self, client: Client, target: Target, arm: str) -> None:
        """Untimed short requests first: the first requests after a start are not warm (field notes:
        cold TTFT 0.43 s on the first run after a restart, 0.16 s on every later one)."""
        options = replace(self.options, prompts=self.warmup_requests, contexts=(WARMUP_CONTEXT,))
        runner = Runner(client, target, options, run_id=f"{self.probe_id}-{arm}-warmup")
        await runner.warm_up(WARMUP_CONTEXT, runner.workload.prompt_set(WARMUP_CONTEXT))

    async def _run(self, client: Client, target: Target, arm: str, run: int, folder: Path) -> dict[str, Any]:
        sink = RecordSink(folder / "requests.jsonl").open()
        try:
            runner = Runner(
                client,
                target,
                self.options,
                run_id=f"{self.probe_id}-{arm}-{run}",
                progress=Progress(1),
                sink=sink,
            )
            # The same prompt set for every arm and run (cold prompts stay unique): arms are compared
            # on the same questions, as the bench compares concurrency levels on the same set.
            runner.workload = Workload(self.probe_id, self.options.prompts, seed=self.options.seed)
            result = await runner.run()
        finally:
            sink.close()
        summary = result.as_json()
        write_summary(folder / "summary.json", summary)
        return summary


def _until_stopped(work: Coroutine[Any, Any, T], stop: threading.Event) -> T:
    async def main() -> T:
        task = asyncio.ensure_future(work)
        while not task.done():
            await asyncio.wait({task}, timeout=0.1)
            if stop.is_set() and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                raise Interrupted("stopped while measuring")
        return task.result()

    return asyncio.run(main())
