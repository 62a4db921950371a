"""`launch check`: the non-disruptive gates against a server that is already running.

The same gates and the same chain runner as a start, seen through a context with no engine of
our own: no log (the start's log belongs to the launcher that watched it), no process to watch.
So only the gates that need nothing but HTTP can run here (`gates.registry.http_only`, read from
what each gate declares it needs); the others are refused by name, saying what they need. Nothing
is started, stopped, promoted or written: a Kubernetes probe or an Ansible task may call it as
often as it likes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from basis.clock import SystemClock
from basis.setting import SettingValues
from gates.base import Need
from gates.chain import ChainReport, ChainRunner
from gates.context import GateContext
from gates.registry import GATES, HTTP_ONLY, build_chain, http_only
from launcher.errors import BadInput
from launcher.host.adapters import ProcessMemory, RequestsHttp
from launcher.profile.candidate import Candidate

# The probe set: /health, the served model name (both in `health`) and one tool call.
DEFAULT_GATES: tuple[str, ...] = ("health", "tool_call")
# `--live`, the liveness probe: /health and one short generation with a deadline (a hung engine
# core answers /health 200; only a generation tells), and no tool-call suite.
LIVE_GATES: tuple[str, ...] = ("health", "canary")
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class CheckRequest:
    gates: tuple[str, ...] = DEFAULT_GATES
    url: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S  # each HTTP request
    wait_s: float = 0.0  # how long a gate may keep saying "not yet" (0: ask once)
    full: bool = False  # every tool-call case of the profile, not only the first


class NoLog:
    """gates.context.LogView for a server whose start we did not watch: no facts, no lines."""

    def __init__(self, clock: SystemClock) -> None:
        self.clock = clock

    def facts(self) -> Mapping[str, Any]:
        return {}

    def lines_since(self, position: int) -> tuple[Sequence[str], int]:
        return (), position

    def wait_for_change(self, timeout_s: float) -> None:
        self.clock.sleep(timeout_s)


class RemoteServer:
    """gates.context.ServerView of a server we did not start: only HTTP says whether it is alive."""

    def alive(self) -> bool:
        return True

    def exit_description(self) -> str | None:
        return None

    def process_tree(self) -> Sequence[int]:
        return ()


def parse_gate_names(text: str) -> tuple[str, ...]:
    """`health,tool_call` → the names, checked: unknown names and gates that need more than HTTP are
    bad input."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise BadInput("--gates is empty", hint=f"for example --gates {','.join(DEFAULT_GATES)}")
    checkable = ", ".join(http_only(GATES))
    for name in names:
        if name not in GATES:
            close = get_close_matches(name, list(GATES), n=1)
            raise BadInput(
                f"--gates names {name!r}, which is no gate",
                hint=f"did you mean {close[0]}?" if close else f"checkable gates: {checkable}",
            )
        if name not in HTTP_ONLY:
            raise BadInput(
                f"gate {name!r} cannot run against a server that is already running: it "
                f"{_beyond_http(name)}; only the chain of a start runs it",
                hint=f"checkable gates: {checkable}; its last verdict is in `launch status`",
            )
    return names


def _beyond_http(gate: str) -> str:
    """What the gate needs besides HTTP, as it declares it: `reads the start's log`."""
    return " and ".join(need.meaning for need in Need if need in GATES[gate].NEEDS - {Need.HTTP})


def check_tables(candidate: Candidate, request: CheckRequest) -> dict[str, dict[str, Any]]:
    """The profile's `[gates.NAME]` tables, bounded for a probe: every gate required, asked for at
    most `wait_s`, each request at most `timeout_s` (or the gate's own, when smaller); tool_call
    runs one case, the profile's first, unless `full`."""
    tables: dict[str, dict[str, Any]] = {}
    for name in request.gates:
        table = dict(candidate.gate_tables.get(name, {}))
        table["required"] = True
        table["timeout_s"] = request.wait_s
        own = SettingValues.of(GATES[name].SETTINGS, table)  # the gate's own settings, declared defaults
        if any(setting.name == "request_timeout_s" for setting in own.settings):
            table["request_timeout_s"] = min(own.number("request_timeout_s"), request.timeout_s)
        if name == "tool_call" and not request.full:
            table["cases"] = list(table.get("cases") or own.declared("cases").default)[:1]
        tables[name] = table
    return tables


def run_check(candidate: Candidate, request: CheckRequest) -> ChainReport:
    """Run the chosen gates once against the server at `request.url` (default: the profile's)."""
    clock = SystemClock()
    http = RequestsHttp(request.url or candidate.base_url, candidate.api_key())
    ctx = GateContext(
        clock=clock,
        http=http,
        log=NoLog(clock),
        server=RemoteServer(),
        memory=ProcessMemory(),
        expect=candidate.expect,
    )
    gates = build_chain(list(request.gates), check_tables(candidate, request))
    try:
        return ChainRunner(gates).run(ctx)
    finally:
        http.close()
