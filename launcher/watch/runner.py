"""The watch's two threads: the canary's, and the free signals' (process states every tick;
`/metrics` every tick while vLLM says requests run, else with `/health` and host memory every few
seconds; the group's memory every leak window).

A canary waits up to its deadline, so it has a thread of its own: the free signals keep coming
meanwhile, and a failed one (a stopped engine core, a stalled engine) asks for a canary at once
instead of at the next interval. A canary that missed its deadline is followed at once by one with
half the deadline, so an idle hang is called within `interval + timeout + timeout / 2`.
Every observation goes to the `Judge`; when its judgement changes
(verdict or check), `on_change` is called — from either thread, so it must only hand the news over.
Constructing starts nothing; `start()` starts both threads, `stop()` ends them (the HTTP call in
flight returns by its own deadline, or at once when the engine is stopped).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from basis.clock import SYSTEM_CLOCK, Clock
from basis.setting import SettingValues
from gates.canary import send_canary
from gates.context import HttpClient
from gates.leak_rule import LeakRule
from gates.memory_leak import MemoryLeakGate
from gates.registry import GATE_SETTINGS
from gates.tool_cases import CASES, ToolCase, judge_reply
from launcher.host.adapters import RequestsHttp
from launcher.host.host_checks import measure_host
from launcher.host.orphans import prefixes_for
from launcher.profile.candidate import Candidate
from launcher.profile.keys import PREFLIGHT
from launcher.watch import probes
from launcher.watch.incident import write_incident
from launcher.watch.verdict import Judge, Judgement, Kind, Observation, Rules, Verdict

TICK_S = 1.0
FREE_EVERY_S = 5.0  # /health, /metrics, host RAM: this often, or at the canary's pace when that is faster
PIDS_EVERY_S = 30.0  # the group's processes are read again this often (walking them scans /proc)
MIN_CANARY_GAP_S = 1.0  # a server that errors at once is retried, not hammered
KEPT_OBSERVATIONS = 100


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """What the watch needs of the candidate that serves, read once."""

    base_url: str
    api_key: str | None
    model: str
    interval_s: float
    timeout_s: float
    stall_s: float
    tool_call_every: int
    tool_case: ToolCase | None
    tool_max_tokens: int
    tool_timeout_s: float
    rules: Rules
    min_available_gib: float
    max_swap_gib: float | None
    leak_rule: LeakRule
    leak_window_s: float
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, candidate: Candidate) -> WatchPlan:
        settings = candidate.settings
        tool = SettingValues.of(GATE_SETTINGS["tool_call"], candidate.gate_tables.get("tool_call"))
        wanted = list(tool.value("cases"))
        # tool-call canaries only where the chain has the tool gate: a server started without tool
        # calling answers them 400, which is the profile's choice, not a sickness
        in_chain = "tool_call" in candidate.gate_order
        case = next((c for c in CASES if in_chain and wanted and c.name == wanted[0]), None)
        leak = MemoryLeakGate(candidate.gate_tables.get("memory_leak", {}))
        names = candidate.expect.served_model_names
        preflight = SettingValues.of(PREFLIGHT, candidate.profile_data.get("preflight"))
        max_swap = preflight.value("max_swap_used_gib")
        return cls(
            base_url=candidate.base_url,
            api_key=candidate.api_key(),
            model=names[0] if names else "",
            interval_s=settings.canary_interval_s,
            timeout_s=settings.canary_timeout_s,
            stall_s=settings.stall_s,
            tool_call_every=settings.canary_tool_call_every,
            tool_case=case,
            tool_max_tokens=tool.integer("max_tokens"),
            tool_timeout_s=max(settings.canary_timeout_s, tool.number("request_timeout_s")),
            rules=Rules(wedge_after=settings.wedge_after),
            min_available_gib=preflight.number("min_host_available_gib"),
            max_swap_gib=None if max_swap is None else float(max_swap),
            leak_rule=leak.rule,
            leak_window_s=float(leak.setting("window_s")),
            prefixes=prefixes_for(candidate.env),
        )

    @property
    def followup_timeout_s(self) -> float:
        """The deadline of the canary sent at once after a missed one."""
        return self.timeout_s / 2


class ServingWatch:
    def __init__(
        self,
        plan: WatchPlan,
        pids: Callable[[], Sequence[int]],
        on_change: Callable[[Judgement], None],
        *,
        on_note: Callable[[str], None] | None = None,
        gpu_bytes: Callable[[Sequence[int]], int | None] | None = None,
        host: Callable[[], tuple[int, int]] = measure_host,
        tick_s: float = TICK_S,
        free_every_s: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        http: HttpClient | None = None,
    ) -> None:
        """`http`: how the server is reached (the real client to `plan.base_url` unless a test passes
        its own); `clock`: what every wait and every observation's time reads; `on_note`: where a
        finding that is no verdict goes once (a tool-call canary the server is not configured for)."""
        self.plan = plan
        self.clock = clock
        self.pids = pids
        self.on_change = on_change
        self.on_note = on_note
        self.gpu_bytes = gpu_bytes
        self.host = host
        self.tick_s = tick_s
        # A watch asked to call a hang within seconds reads its free signals as often: a stalled
        # decode or two low-RAM samples are then told at the canary's pace, not five seconds apart.
        self.free_every_s = min(FREE_EVERY_S, plan.interval_s) if free_every_s is None else free_every_s
        self.judge = Judge(plan.rules)
        self._own_http = http is None
        self.http: HttpClient = http if http is not None else RequestsHttp(plan.base_url, plan.api_key)
        self.observations: deque[tuple[float, Observation]] = deque(maxlen=KEPT_OBSERVATIONS)
        self.canaries = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._canary_now = threading.Event()
        self._shown: Judgement = Judgement(Verdict.SERVING)
        self._threads: list[threading.Thread] = []
        self._processes = probes.ProcessStates(plan.prefixes, long_d_s=plan.timeout_s, halt_s=plan.stall_s)
        self._progress = probes.EngineProgress(stall_s=plan.stall_s)
        self._leak = probes.LeakWindows(plan.leak_rule)
        self._last_reading: probes.MetricsReading | None = None
        self._traffic_base: probes.MetricsReading | None = None
        self._tools_off = False  # the server answered that it does not do tool calls
        self._missed = False  # the last canary missed its deadline: the next goes at once, shorter
        self._pids: Sequence[int] = ()
        self._pids_at = -PIDS_EVERY_S
        now = clock.monotonic()
        self._next_free, self._next_leak = now + self.free_every_s, now + plan.leak_window_s

    # ---- life ------------------------------------------------------------------------------------
    def start(self) -> None:
        for target, name in ((self._canary_loop, "watch-canary"), (self._free_loop, "watch-signals")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopped.set()
        self._canary_now.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=0.2)  # an HTTP call in flight ends by its own deadline
        if self._own_http and isinstance(self.http, RequestsHttp):
            self.http.close()

    @property
    def judgement(self) -> Judgement:
        with self._lock:
            return self._shown

    def keep_evidence(
        self,
        directory: Path,
        *,
        profile: str,
        label: str,
        judgement: Judgement,
        action: str,
        engine_log: Path,
    ) -> Path:
        """The incident bundle (launcher/watch/incident.py), written before anything is stopped."""
        return write_incident(
            directory,
            profile=profile,
            label=label,
            judgement=judgement,
            action=action,
            pids=self.pids(),
            prefixes=self.plan.prefixes,
            observations=self.recent(),
            engine_log=engine_log,
            now=self.clock.time(),
        )

    def recent(self) -> list[tuple[float, Observation]]:
        """The last observations with their epoch times (the incident bundle lists them)."""
        with self._lock:
            return list(self.observations)

    # ---- the judge ---------------------------------------------------------------------------------
    def observe(self, obs: Observation, *, retry: bool = False) -> Observation:
        """Judge one observation; a verdict that turned bad, or a failed canary, asks for a canary now."""
        with self._lock:
            if self._stopped.is_set():
                return obs
            self.judge.observe(obs)
            self.observations.append((self.clock.time(), obs))
            now = self.judge.judgement()
            changed = not now.same_as(self._shown)
            self._shown = now
        if (changed and now.verdict is not Verdict.SERVING) or (retry and not obs.ok):
            self._canary_now.set()
        if changed:
            self.on_change(now)
        return obs

    # ---- the canary's thread --------------------------------------------------------------------------
    def _canary_loop(self) -> None:
        due = self.clock.monotonic() + self.plan.interval_s
        while not self._stopped.is_set():
            self.clock.wait(self._canary_now, max(0.0, due - self.clock.monotonic()))
            if self._stopped.is_set():
                return
            due = self.canary_round()

    def canary_round(self) -> float:
        """One canary now (or a tool-call canary); when the next one is due. After a miss the next
        goes at once with the shorter deadline; after an error, a retry gap first (an error may come
        at once, and the server is retried, not hammered)."""
        self._canary_now.clear()
        obs = self.observe(self._one_canary(), retry=True)
        self._missed = obs.kind is Kind.TIMEOUT
        if self._missed:
            return self.clock.monotonic()
        if not obs.ok:
            self.clock.wait(self._stopped, MIN_CANARY_GAP_S)
        return self.clock.monotonic() + self.plan.interval_s

    def _one_canary(self) -> Observation:
        self.canaries += 1
        every = self.plan.tool_call_every
        case = self.plan.tool_case
        tools_on = case is not None and not self._tools_off and not self._missed
        if every and tools_on and case is not None and self.canaries % every == 0:
            return self._tool_call(case)
        timeout = self.plan.followup_timeout_s if self._missed else self.plan.timeout_s
        answer = send_canary(self.http, self.plan.model, timeout, clock=self.clock)
        return probes.canary_observation(answer, self.clock.monotonic(), timeout)

    def _tool_call(self, case: ToolCase) -> Observation:
        started = self.clock.monotonic()
        body = case.request(self.plan.model, self.plan.tool_max_tokens)
        reply = self.http.post_json("/v1/chat/completions", body, self.plan.tool_timeout_s)
        waited = self.clock.monotonic() - started
        now = self.clock.monotonic()
        unconfigured = probes.tool_calls_unconfigured(reply.status, reply.body, now, case.name)
        if unconfigured is not None:
            self._tools_off = True
            if self.on_note is not None:
                self.on_note(unconfigured.detail)
            return unconfigured
        result = judge_reply(case, reply.status, reply.body)
        timeout = self.plan.tool_timeout_s
        return probes.tool_call_observation(
            result, reply.timed_out, self.clock.monotonic(), timeout if reply.timed_out else waited
        )

    # ---- the free signals' thread -----------------------------------------------------------------------
    def _free_loop(self) -> None:
        now = self.clock.monotonic()
        self._next_free, self._next_leak = now + self.free_every_s, now + self.plan.leak_window_s
        while not self.clock.wait(self._stopped, self.tick_s):
            self.signals_round(self.clock.monotonic())

    def signals_round(self, now: float) -> None:
        """The process states at every tick, and /metrics too while requests run (a stall is called
        in seconds); /health, /metrics' traffic share and host RAM, and the leak window, when due."""
        self._check_processes(now)
        due = now >= self._next_free
        if due:
            self._next_free = now + self.free_every_s
            self._check_health()
            self._check_host()
        last = self._last_reading
        if due or (last is not None and last.working):
            self._check_metrics(traffic=due)
        if now >= self._next_leak:
            self._next_leak += self.plan.leak_window_s
            self._check_leak()

    def _group(self, now: float) -> Sequence[int]:
        if now - self._pids_at >= PIDS_EVERY_S:
            self._pids, self._pids_at = list(self.pids()), now
        return self._pids

    def _check_processes(self, now: float) -> None:
        self.observe(self._processes.observe(self._group(now), now))

    def _check_health(self) -> None:
        started = self.clock.monotonic()
        reply = self.http.get("/health", self.plan.timeout_s)
        now = self.clock.monotonic()
        self.observe(probes.health_observation(reply, now, now - started, self.plan.timeout_s))

    def _check_metrics(self, *, traffic: bool) -> None:
        reply = self.http.get("/metrics", self.plan.timeout_s)
        if reply.status != 200:
            return  # /metrics absent (--disable-log-stats has no vllm:*) or slow: other checks speak
        reading = probes.read_metrics(reply.body, self.clock.monotonic())
        self.observe(self._progress.observe(reading))
        self._last_reading = reading
        if not traffic:
            return
        if self._traffic_base is not None:  # the 5xx share over windows of the free pace
            self.observe(probes.traffic_observation(self._traffic_base, reading))
        self._traffic_base = reading

    def _check_host(self) -> None:
        available, swap = self.host()
        self.observe(
            probes.host_memory_observation(
                available, swap, self.plan.min_available_gib, self.plan.max_swap_gib, self.clock.monotonic()
            )
        )

    def _check_leak(self) -> None:
        now = self.clock.monotonic()
        used, source = probes.group_memory(self._group(now), self.gpu_bytes)
        self.observe(self._leak.observe(used, source, now))
