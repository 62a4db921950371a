"""Every key a profile may hold outside `[args]`/`[env]`/`[gates.*]`, declared once.

docs/profiles.md carries a table generated from these declarations (`reference_markdown`); a test
keeps the two in sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from basis.setting import Setting, SettingValues

TOP_LEVEL: tuple[Setting, ...] = (
    Setting("extends", str, None, "Name of the profile this one builds on (a chain; cycles are an error)."),
    Setting("description", str, "", "One line for humans: what this profile serves and where."),
    Setting(
        "abstract",
        bool,
        False,
        "Only to be extended (like `base`): renders, but never starts. Not inherited.",
    ),
    Setting("engine", dict, {}, "How to start the server: command, model, name, address (below)."),
    Setting("args", dict, {}, "vLLM flags, snake_case or kebab-case, checked against vLLM's own parser."),
    Setting("env", dict, {}, "Environment added to vLLM's (strings; VLLM_* names are checked)."),
    Setting("gates", dict, {}, "Per-gate tables `[gates.NAME]` and `gates.order` (docs/gates.md)."),
    Setting("preflight", dict, {}, "Host checks before start (docs/host-safety.md)."),
    Setting("supervisor", dict, {}, "Start deadline, stop grace and monitoring (docs/gates.md)."),
    Setting(
        "frontdoor",
        dict,
        {},
        "One stable port for clients, pointed at whichever engine serves (`launch frontdoor`, "
        "docs/frontdoor.md). On when it sets `port`.",
    ),
)

ENGINE: tuple[Setting, ...] = (
    Setting(
        "command",
        list,
        ["vllm", "serve"],
        'Argv prefix; `["vllm-sim", "serve"]` runs the simulator.',
        items=str,
    ),
    Setting("model", str, None, "Model path or name: vLLM's positional MODEL argument (required)."),
    Setting("served_model_name", (str, list), None, "Name(s) clients use; the first is the metrics label."),
    Setting("host", str, "127.0.0.1", "Address vLLM binds."),
    Setting("port", int, 8000, "Port vLLM listens on (1-65535).", minimum=1, maximum=65535),
    Setting(
        "api_key_env",
        str,
        None,
        "NAME of the environment variable holding the API key; the key itself never goes in a profile.",
    ),
    Setting(
        "schema",
        str,
        "auto",
        "Flag schema: `auto` (installed vLLM, else the 0.33.0 snapshot), `snapshot`, or `none` "
        "(a fork: unknown flags are warnings).",
        choices=("auto", "snapshot", "none"),
    ),
)

PREFLIGHT: tuple[Setting, ...] = (
    Setting(
        "reap_orphans",
        bool,
        False,
        "End vLLM orphans before starting (SIGTERM, grace, SIGKILL), as `--reap-orphans` does.",
    ),
    Setting(
        "reap_grace_s",
        float,
        10.0,
        "How long a reaped process gets between SIGTERM and SIGKILL.",
        "s",
        minimum=0,
        maximum=3600,
    ),
    Setting(
        "reap_deadline_s",
        float,
        60.0,
        "How long reaping may take in all: until the processes are gone and (NVML) their memory is back.",
        "s",
        minimum=0,
        maximum=3600,
    ),
    Setting(
        "min_host_available_gib",
        float,
        2.0,
        "Refuse to start when the host has less RAM available than this (psutil `available`).",
        "GiB",
        minimum=0,
    ),
    Setting(
        "cuda_context_mib",
        float,
        600.0,
        "GPU memory vLLM's process takes for its CUDA context before it measures free memory; the "
        "gpu_memory check counts it (523–533 MiB measured on an H200, torch 2.11, CUDA 13; set 0 to ignore).",
        "MiB",
        minimum=0,
    ),
    Setting(
        "max_swap_used_gib",
        float,
        None,
        "Refuse to start when more swap than this is in use; unset: not checked.",
        "GiB",
        minimum=0,
    ),
    Setting(
        "restart_max_failures",
        int,
        3,
        "Failed starts of one candidate (same argv and env) after which it is no longer retried.",
        minimum=1,
        maximum=1000,
    ),
    Setting(
        "restart_window_s",
        float,
        7200.0,
        "The window in which those failed starts are counted (>= failures x TimeoutStartSec).",
        "s",
        minimum=1,
    ),
)


SUPERVISOR: tuple[Setting, ...] = (
    Setting(
        "stop_grace_s",
        (int, float),
        30.0,
        "SIGTERM to the engine's process group, then SIGKILL after this: every stop of `launch`, "
        "`launch try` and a probe's arms, a stop on a signal too.",
        unit="s",
        minimum=0,
        maximum=3600,
    ),
    Setting(
        "leak_monitor",
        str,
        None,
        "What a leak found by the serving watch (the leak rule of [gates.memory_leak], window by "
        "window) does: `log`, `restart` or `rollback`. Unset: what `on_wedge` says.",
        choices=("log", "restart", "rollback"),
    ),
    Setting(
        "watch",
        bool,
        True,
        "After promotion (and after a rollback), judge the server all the time: a canary generation, "
        "/health, /metrics progress, its processes' states, host RAM and swap, its memory "
        "(docs/gates.md, The serving watch). false: only a death is noticed.",
    ),
    Setting(
        "canary_interval_s",
        (int, float),
        10.0,
        "One short real generation through the served model this often (sooner after a failed check; "
        "after a missed one the next goes at once with half the deadline, so an idle hang is called "
        "within canary_interval_s + 2 x canary_timeout_s).",
        unit="s",
        minimum=1,
        maximum=3600,
    ),
    Setting(
        "canary_timeout_s",
        (int, float),
        5.0,
        "Deadline of each canary and each /health and /metrics read of the watch (a canary queued "
        "behind a full batch while vLLM's counters move is busy, not missed).",
        unit="s",
        minimum=0.5,
        maximum=600,
    ),
    Setting(
        "stall_s",
        (int, float),
        3.0,
        "With requests running, this long without any progress vLLM publishes (tokens, KV-cache "
        "usage as a chunked prefill fills it, requests admitted or finished) is wedged at once; a "
        "prefill whose steps come slower than that gets twice its own pace. Also how long a process "
        "of the engine may stay stopped (state T) before it is wedged.",
        unit="s",
        minimum=0.5,
        maximum=600,
    ),
    Setting(
        "canary_tool_call_every",
        int,
        20,
        "Every Nth canary is the tool_call gate's first case instead, judged by the gate's own judge "
        "(0: never).",
        minimum=0,
        maximum=100_000,
    ),
    Setting(
        "wedge_after",
        int,
        2,
        "Canaries (or /health reads) in a row that miss their deadline, with no progress in /metrics, "
        "before the server is called wedged.",
        minimum=1,
        maximum=100,
    ),
    Setting(
        "on_wedge",
        str,
        "restart",
        "What a wedged, failing or starving verdict does: `restart` (the same launch; the launch "
        "served before it if it happens again within preflight.restart_window_s), `rollback` (the "
        "launch served before it at once) or `log` (record it; status exits 3, systemd's watchdog "
        "stops). Evidence is kept first either way.",
        choices=("restart", "rollback", "log"),
    ),
    Setting(
        "park",
        str,
        "stop",
        "What happens to the serving engine while a change is tried: `stop` (a rejected change costs "
        "a cold start of last-good) or `sleep` (vLLM's sleep mode: weights to host RAM, woken and "
        "re-gated in seconds when the change is rejected; needs a loopback host and park_port; "
        "docs/park.md).",
        choices=("stop", "sleep"),
    ),
    Setting(
        "trial",
        str,
        "instead",
        "Where a change is tried: `instead` of what serves (which `park` stops or puts to sleep), or "
        "`beside` it: the candidate starts on park_port while production keeps serving through the "
        "front door, and clients move only when it passed. `beside` falls back to `park` when the "
        "GPUs cannot hold both or the power limit cannot be set (the reason is recorded; docs/park.md).",
        choices=("instead", "beside"),
    ),
    Setting(
        "beside_margin_gib",
        (int, float),
        1.0,
        "With trial = beside: GPU memory each GPU must have free beyond what vLLM's own start check "
        "asks of the candidate (util × total), counting what production holds.",
        unit="GiB",
        minimum=0,
        maximum=1024,
    ),
    Setting(
        "power_limit_w",
        (int, float),
        None,
        "With trial = beside: each GPU's power limit while two engines share the set (two loads at "
        "once have tripped a PSU); set through NVML for the trial and restored after it, on every "
        "exit path. Where NVML refuses, the change falls back to `park`.",
        unit="W",
        minimum=1,
        maximum=10000,
    ),
    Setting(
        "park_port",
        int,
        None,
        'With park = "sleep" or trial = "beside": the second port. The sleeper (or production) keeps its '
        "port, so the candidate starts on the other one; what serves alternates between engine.port "
        "and park_port.",
        minimum=1,
        maximum=65535,
    ),
    Setting(
        "keep_parked",
        bool,
        False,
        'With park = "sleep": after a promotion keep the old engine asleep (its GPU residue and its '
        "weights in host RAM) until the next change, so `launch rollback` to it is seconds too.",
    ),
    Setting(
        "wake_timeout_s",
        (int, float),
        120.0,
        "Deadline of each sleep, wake and prefix-cache reset; a wake past it is a failed wake "
        "(last-good then starts cold).",
        unit="s",
        minimum=1,
        maximum=3600,
    ),
    Setting(
        "on_switch",
        list,
        None,
        "A command run (no shell) each time what serves moves to another port, e.g. "
        '`["/usr/local/bin/vllm-upstream", "{host}", "{port}"]` (placeholders {profile}, {host}, '
        "{port}, {url}): it points the proxy in front at the engine that serves (docs/park.md).",
        items=str,
    ),
    Setting(
        "warm_weights",
        bool,
        True,
        "Before what serves is parked or stopped for a change, read the candidate's weight files (a "
        "local model dir or GGUF file) into the page cache while it still serves, so the outage does "
        "not include the disk; only where host RAM holds them beside what a park moves there and "
        "preflight.min_host_available_gib (docs/park.md).",
    ),
    Setting(
        "warm_weights_timeout_s",
        (int, float),
        300.0,
        "The most that reading may take: a slow disk delays the change by no more than this (what was "
        "read by then stays read).",
        unit="s",
        minimum=1,
        maximum=86400,
    ),
)


FRONTDOOR: tuple[Setting, ...] = (
    Setting(
        "port",
        int,
        None,
        "The port clients use: the front door (Caddy) listens here and forwards to the engine that "
        "serves, on engine.port or supervisor.park_port. Setting it turns the front door on.",
        minimum=1,
        maximum=65535,
    ),
    Setting(
        "host",
        str,
        "127.0.0.1",
        "The address the front door binds for clients: an IP address (0.0.0.0 or :: for every "
        "interface) or `localhost`.",
    ),
    Setting(
        "admin",
        str,
        None,
        "Where the front door's admin API listens (it can change where traffic goes, so never on a "
        "network): an absolute unix socket path, or 127.0.0.1:PORT, [::1]:PORT, localhost:PORT. "
        "Unset: a socket in the profile's state dir, only its owner may connect.",
    ),
    Setting(
        "hold_s",
        (int, float),
        120.0,
        "How long a request waits at the door for an engine that serves (a start, a change, a "
        "restart) before it is answered 503.",
        unit="s",
        minimum=0,
        maximum=3600,
    ),
    Setting(
        "retry_after_s",
        int,
        30,
        "The Retry-After of the 503 a request gets when no engine served within hold_s.",
        unit="s",
        minimum=0,
        maximum=86400,
    ),
    Setting(
        "drain_timeout_s",
        (int, float),
        60.0,
        "How long the launcher waits for the requests in flight on an engine to finish before it "
        "parks or stops that engine (and how long the front door's own stop lets them finish).",
        unit="s",
        minimum=0,
        maximum=3600,
    ),
)


@dataclass(frozen=True, slots=True)
class SupervisorSettings:
    """A candidate's `[supervisor]` table, typed, with the declared defaults filled in."""

    stop_grace_s: float
    leak_monitor: str | None
    watch: bool
    canary_interval_s: float
    canary_timeout_s: float
    stall_s: float
    canary_tool_call_every: int
    wedge_after: int
    on_wedge: str
    park: str
    trial: str
    beside_margin_gib: float
    power_limit_w: float | None
    park_port: int | None
    keep_parked: bool
    wake_timeout_s: float
    on_switch: tuple[str, ...] | None
    warm_weights: bool
    warm_weights_timeout_s: float

    @classmethod
    def read(cls, table: Mapping[str, Any] | None) -> SupervisorSettings:
        values = SettingValues.of(SUPERVISOR, table)
        return cls(
            stop_grace_s=values.number("stop_grace_s"),
            leak_monitor=values.optional_text("leak_monitor"),
            watch=values.flag("watch"),
            canary_interval_s=values.number("canary_interval_s"),
            canary_timeout_s=values.number("canary_timeout_s"),
            stall_s=values.number("stall_s"),
            canary_tool_call_every=values.integer("canary_tool_call_every"),
            wedge_after=values.integer("wedge_after"),
            on_wedge=values.text("on_wedge"),
            park=values.text("park"),
            trial=values.text("trial"),
            beside_margin_gib=values.number("beside_margin_gib"),
            power_limit_w=None if values.value("power_limit_w") is None else values.number("power_limit_w"),
            park_port=None if values.value("park_port") is None else values.integer("park_port"),
            keep_parked=values.flag("keep_parked"),
            wake_timeout_s=values.number("wake_timeout_s"),
            on_switch=None
            if values.value("on_switch") is None
            else tuple(map(str, values.value("on_switch"))),
            warm_weights=values.flag("warm_weights"),
            warm_weights_timeout_s=values.number("warm_weights_timeout_s"),
        )

    @property
    def leak_action(self) -> str:
        return self.leak_monitor or self.on_wedge

    @property
    def second_port(self) -> int | None:
        """The port a candidate starts on while the engine that serves keeps its own: park_port, where
        the profile parks or tries beside (else none: a change is started on engine.port)."""
        return self.park_port if self.park == "sleep" or self.trial == "beside" else None


@dataclass(frozen=True, slots=True)
class FrontdoorSettings:
    """A profile's `[frontdoor]` table, typed, with the declared defaults filled in; `port` None:
    the profile has no front door."""

    port: int | None
    host: str
    admin: str | None
    hold_s: float
    retry_after_s: int
    drain_timeout_s: float

    @classmethod
    def read(cls, table: Mapping[str, Any] | None) -> FrontdoorSettings:
        values = SettingValues.of(FRONTDOOR, table)
        return cls(
            port=None if values.value("port") is None else values.integer("port"),
            host=values.text("host"),
            admin=values.optional_text("admin"),
            hold_s=values.number("hold_s"),
            retry_after_s=values.integer("retry_after_s"),
            drain_timeout_s=values.number("drain_timeout_s"),
        )

    @property
    def enabled(self) -> bool:
        return self.port is not None


def frontdoor_settings(profile_data: Mapping[str, Any]) -> FrontdoorSettings:
    """A profile's `[frontdoor]` table read through its declarations."""
    return FrontdoorSettings.read(profile_data.get("frontdoor"))


def engine_settings(profile_data: Mapping[str, Any]) -> SettingValues:
    """A profile's `[engine]` table read through its declarations (`host`, `port`, `command`, …)."""
    return SettingValues.of(ENGINE, profile_data.get("engine"))


def reference_markdown() -> str:
    """The key tables of docs/profiles.md, generated from the declarations above."""
    lines = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    lines += [_row(s) for s in TOP_LEVEL]
    lines += ["", "`[engine]`:", "", "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    lines += [_row(s) for s in ENGINE]
    lines += ["", "`[preflight]` (docs/host-safety.md):", "", "| key | type | default | allowed | meaning |"]
    lines += ["|---|---|---|---|---|"]
    lines += [_row(s) for s in PREFLIGHT]
    lines += ["", "`[supervisor]`:", "", "| key | type | default | allowed | meaning |"]
    lines += ["|---|---|---|---|---|"]
    lines += [_row(s) for s in SUPERVISOR]
    lines += ["", "`[frontdoor]` (docs/frontdoor.md):", "", "| key | type | default | allowed | meaning |"]
    lines += ["|---|---|---|---|---|"]
    lines += [_row(s) for s in FRONTDOOR]
    return "\n".join(lines) + "\n"


def _row(setting: Setting) -> str:
    default = "—" if setting.default in (None, "", {}) else f"`{setting.default!r}`".replace("'", '"')
    unit = f" ({setting.unit})" if setting.unit else ""
    allowed = setting.allowed
    return f"| `{setting.name}` | {setting.type_name} | {default} | {allowed} | {setting.description}{unit} |"
