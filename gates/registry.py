"""The explicit registry of gates: name → class. The default chain order is the registry's order.

A gate class declares its settings (`SETTINGS`, plus the common `required`, `timeout_s`, `poll_s`);
the profile validator reads them to reject unknown gates and keys, docs/gates.md is generated from them.
It declares what it needs (`NEEDS`); `http_only` reads that, so no caller keeps its own list of the
gates that can judge a server over HTTP alone (`launch check`, a woken engine's re-gate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from basis.setting import Setting
from gates.base import GateBase, Need
from gates.canary import CanaryGate
from gates.graph_capture import GraphCaptureGate
from gates.health import HealthGate
from gates.kernel_marker import KernelMarkerGate
from gates.memory_leak import MemoryLeakGate
from gates.smoke import SmokeGate
from gates.tool_call import ToolCallGate

GATES: dict[str, type[GateBase]] = {
    "kernel_marker": KernelMarkerGate,
    "graph_capture": GraphCaptureGate,
    "health": HealthGate,
    "tool_call": ToolCallGate,
    "memory_leak": MemoryLeakGate,
    "smoke": SmokeGate,
    "canary": CanaryGate,
}
GATE_SETTINGS: dict[str, tuple[Setting, ...]] = {name: cls.all_settings() for name, cls in GATES.items()}
# Run unless the profile's `gates.order` says otherwise; memory_leak and smoke are opt-in (they take
# minutes); canary is what the serving watch and `launch check --live` ask (a start's health and
# tool_call already generate).
DEFAULT_ORDER: tuple[str, ...] = ("kernel_marker", "graph_capture", "health", "tool_call")
# The gates that need nothing but the server's HTTP API: they can judge any server, started by this
# launcher or not, at any time (the others read the start's log, watch the engine's processes or
# load the server for minutes).
HTTP_ONLY: frozenset[str] = frozenset(name for name, cls in GATES.items() if cls.NEEDS.issubset({Need.HTTP}))


def http_only(order: Iterable[str]) -> tuple[str, ...]:
    """The gates of `order` that need nothing but HTTP, in that order (`http_only(GATES)`: all of them)."""
    return tuple(name for name in order if name in HTTP_ONLY)


def gate_settings(name: str) -> tuple[Setting, ...] | None:
    """All settings a gate accepts, or None when no gate has that name."""
    return GATE_SETTINGS.get(name)


def build_chain(order: list[str] | None, tables: Mapping[str, Mapping[str, Any]]) -> list[GateBase]:
    """Gate objects for a profile: `gates.order` (or the default), each with its `[gates.NAME]` table."""
    names = list(order) if order is not None else list(DEFAULT_ORDER)
    return [GATES[name](dict(tables.get(name, {}))) for name in names]
