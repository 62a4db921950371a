"""What the HTTP handlers share: settings, scheduler, metrics, ground truth, and the engine's health."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vllm_sim.config import SimConfig
from vllm_sim.engine_link import EngineLink
from vllm_sim.groundtruth import GroundTruth
from vllm_sim.host_metrics import HttpStats
from vllm_sim.logline import LogWriter
from vllm_sim.metrics import SimMetrics
from vllm_sim.scheduler import Scheduler
from vllm_sim.versions import Dialect


@dataclass(eq=False)
class ServerState:
    cfg: SimConfig
    dialect: Dialect
    log: LogWriter
    scheduler: Scheduler
    metrics: SimMetrics
    truth: GroundTruth
    created: int
    on_first_request: Callable[[], None]
    engine: EngineLink  # utility calls to the engine core (sleep mode, prefix cache)
    engine_dead: bool = False
    draining: bool = False
    in_flight: int = 0
    served_first: bool = False
    tool_asks: int = 0  # requests with tools so far (`--sim-tool-fault-after-requests`)
    cache_info: dict[str, str] = field(default_factory=dict)
    http: HttpStats = field(default_factory=HttpStats)  # the instrumentator's counts (`http_*`)

    def first_request(self) -> None:
        if not self.served_first:
            self.served_first = True
            self.on_first_request()
