"""How the supervisor executes a start: which engine it makes, what judges it (engine_port.py) and
how it sleeps and wakes (park.py).
The defaults are the real ones; a unit test passes a scripted engine and scripted reports."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.supervisor.attempt import gate_attempt
from launcher.supervisor.engine import EngineProcess
from launcher.supervisor.engine_port import EngineFactory, GateRunner
from launcher.supervisor.park import SleepFactory, VllmSleep


@dataclass(frozen=True, slots=True)
class Execute:
    engine: EngineFactory = EngineProcess
    gates: GateRunner = gate_attempt
    sleep: SleepFactory = VllmSleep  # vLLM's sleep routes of one engine (park = "sleep")
