"""The simulator's own flags (`--sim-*`), declared once; each also reads `VLLM_SIM_<NAME>`.

They live here, not in `vllm_sim`, because two programs read them: the simulator parses them, and
the launcher's profile validator accepts them (`sim_option_specs()`) when a profile's
`engine.command` is `vllm-sim`, without importing the simulator.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vllm_flags.schema import OptionSpec

GROUP = "Simulator"
PHASES_CRASH = ("loading", "profiling", "capture", "serving")
PHASES_HANG = ("loading", "profiling", "capture")
MARKER_PHASES = ("loading", "warmup", "serving")
TOOL_FAULTS = ("malformed", "wrong-name", "text")
VERSIONS = ("0.33", "0.26")
WAKE_FAULTS = ("fail", "hang", "stale-cache", "garbage")


@dataclass(frozen=True, slots=True)
class SimFlag:
    """One simulator flag: its option string, value type, default and what it does."""

    option: str
    type: str  # "flag" | "str" | "int" | "float"
    default: object
    help: str
    choices: tuple[str, ...] | None = None

    @property
    def dest(self) -> str:
        return self.option[2:].replace("-", "_")

    @property
    def env(self) -> str:
        return "VLLM_" + self.dest.upper()


SIM_FLAGS: tuple[SimFlag, ...] = (
    SimFlag("--sim-vllm-version", "str", "0.33", "vLLM version whose log/API dialect to speak", VERSIONS),
    SimFlag("--sim-speed", "float", 1.0, "time multiplier: 10 runs every phase and token 10x faster"),
    SimFlag("--sim-startup-speed", "float", None, "time multiplier of startup only (default: --sim-speed)"),
    SimFlag("--sim-gpu-memory-gib", "float", 80.0, "simulated total memory of each GPU (GiB)"),
    SimFlag("--sim-free-memory-gib", "float", None, "simulated free GPU memory at start (default: all)"),
    SimFlag("--sim-weights-gib", "float", None, "weights size (default: from the model name, 2 B/param)"),
    SimFlag("--sim-kv-bytes-per-token", "int", None, "KV bytes per token (default: 18432 x params in B)"),
    SimFlag("--sim-model-max-len", "int", 40960, "the model's own max_model_len (config.json)"),
    SimFlag("--sim-decode-ms", "float", 12.0, "decode step time at batch 1 with CUDA graphs (ms)"),
    SimFlag("--sim-decode-ms-per-seq", "float", 0.08, "extra decode step time per running sequence (ms)"),
    SimFlag("--sim-eager-factor", "float", 3.0, "decode step multiplier when a batch runs eager"),
    SimFlag("--sim-prefill-us-per-token", "float", 40.0, "prefill cost per uncached prompt token (us)"),
    SimFlag("--sim-spec-acceptance", "float", 0.8, "base per-token draft acceptance with spec decoding"),
    SimFlag("--sim-reasoning", "flag", False, "answer like a reasoning model (as with --reasoning-parser)"),
    SimFlag("--sim-ground-truth", "str", None, "write one JSON line per finished request to this file"),
    SimFlag("--sim-crash-at", "str", None, "fault: the engine dies in this phase", PHASES_CRASH),
    SimFlag("--sim-crash-after-s", "float", 1.0, "with --sim-crash-at serving: seconds after ready (scaled)"),
    SimFlag("--sim-crash-after-requests", "int", None, "fault: the engine dies after N finished requests"),
    SimFlag("--sim-hang-at", "str", None, "fault: startup stops in this phase, never ready", PHASES_HANG),
    SimFlag("--sim-oom-at-capture", "flag", False, "fault: torch CUDA OOM during CUDA graph capture"),
    SimFlag("--sim-capture-fallback", "flag", False, "fault: capture sizes silently become [1, 2]"),
    SimFlag("--sim-eager-fallback", "flag", False, "fault: the engine runs eager though not asked"),
    SimFlag("--sim-marker", "str", None, "a kernel-ready marker line the engine (or each worker) prints"),
    SimFlag("--sim-marker-phase", "str", "warmup", "when the marker is printed", MARKER_PHASES),
    SimFlag(
        "--sim-leak-mib-per-min",
        "float",
        0.0,
        "fault: engine RSS grows this much per real minute, from ready on",
    ),
    SimFlag(
        "--sim-warmup-growth-mib",
        "float",
        0.0,
        "allocator warm-up: engine RSS grows this much after the first request, then stops",
    ),
    SimFlag("--sim-warmup-growth-s", "float", 20.0, "real seconds over which the warm-up growth happens"),
    SimFlag("--sim-tool-fault", "str", None, "fault: tool calls come out wrong this way", TOOL_FAULTS),
    SimFlag(
        "--sim-tool-fault-after-requests",
        "int",
        None,
        "fault: --sim-tool-fault only after the first N requests with tools (a model that goes bad later)",
    ),
    SimFlag("--sim-degenerate", "flag", False, "fault: answers are one phrase repeated"),
    SimFlag("--sim-slow-decode", "float", 1.0, "fault: decode steps take this many times longer"),
    SimFlag(
        "--sim-orphans",
        "flag",
        False,
        "fault: children ignore SIGTERM and their parent's death; only SIGKILL ends them",
    ),
    SimFlag(
        "--sim-ignore-sigterm-s", "float", 0.0, "fault: SIGTERM is acted on only this many real seconds later"
    ),
    SimFlag("--sim-serve-model-name", "str", None, "fault: serve this model name instead of the asked one"),
    SimFlag("--sim-gpu-allocate", "flag", False, "hold real GPU memory (util x total) when torch+CUDA exist"),
    SimFlag(
        "--sim-gpu-set",
        "str",
        None,
        "hold util x total on this simulated GPU set (a directory, basis/simgpus.py) instead of "
        "--sim-gpu-memory-gib; CUDA_VISIBLE_DEVICES picks its devices",
    ),
    SimFlag(
        "--sim-watchdog-s",
        "float",
        5.0,
        "the watchdog's period: after engine death the server exits by then (scaled)",
    ),
    SimFlag(
        "--sim-hang-after-requests",
        "int",
        None,
        "fault: after N finished requests the engine core stops stepping, /health stays 200",
    ),
    SimFlag(
        "--sim-stall-after-tokens",
        "int",
        None,
        "fault: after N generated tokens the engine core stops mid-batch, requests left running",
    ),
    SimFlag(
        "--sim-error-after-requests",
        "int",
        None,
        "fault: every completion after the first N answers HTTP 500 (internal error), /health 200",
    ),
    SimFlag(
        "--sim-host-pressure-mib",
        "int",
        0,
        "fault: from ready on, the engine core fills this much real RAM (at most 8192)",
    ),
    SimFlag("--sim-host-pressure-s", "float", 60.0, "real seconds over which the host pressure grows"),
    SimFlag(
        "--sim-wake-fault",
        "str",
        None,
        "fault: /wake_up fails, never answers, wakes a stale prefix cache, or wakes weights that "
        "answer garbage (vLLM issues 16234, 17103)",
        WAKE_FAULTS,
    ),
)


def sim_option_specs() -> list[OptionSpec]:
    """The sim flags as schema options, for the profile validator (engine.command = vllm-sim)."""
    specs: list[OptionSpec] = []
    for flag in SIM_FLAGS:
        if flag.type == "flag":
            specs.append(OptionSpec(flag.option, flag.dest, "flag", group=GROUP, sets=True))
        else:
            specs.append(
                OptionSpec(flag.option, flag.dest, "value", type=flag.type, choices=flag.choices, group=GROUP)
            )
    return specs


def env_default(flag: SimFlag, environ: dict[str, str] | os._Environ[str]) -> object:
    """The flag's value from `VLLM_SIM_<NAME>`, else its declared default (CLI still wins)."""
    raw = environ.get(flag.env)
    if raw is None or raw == "":
        return flag.default
    if flag.type == "flag":
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if flag.type == "int":
        return int(raw)
    if flag.type == "float":
        return float(raw)
    return raw


def reference_markdown() -> str:
    """The flag table of docs/simulator.md, generated from `SIM_FLAGS` (a test keeps the doc in sync)."""
    rows = ["| flag | env | type | default | what it does |", "| --- | --- | --- | --- | --- |"]
    for flag in SIM_FLAGS:
        kind = "on/off" if flag.type == "flag" else flag.type
        if flag.choices:
            kind = " \\| ".join(flag.choices)
        default = "off" if flag.type == "flag" else ("-" if flag.default is None else str(flag.default))
        rows.append(f"| `{flag.option}` | `{flag.env}` | {kind} | {default} | {flag.help} |")
    return "\n".join(rows) + "\n"
