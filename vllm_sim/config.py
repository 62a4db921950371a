"""The simulator's resolved settings: vLLM flags and sim flags turned into one picklable value.

vLLM's defaults that depend on the GPU (vllm-facts.md §9) are taken from the simulated GPU size.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vllm_sim import cudagraph
from vllm_sim.faults import Faults, faults_from
from vllm_sim.memory import MemoryPlan, plan_memory
from vllm_sim.parsers import parsers_for, unknown_parser_error, unknown_reasoning_026
from vllm_sim.timing import Timing, timing_from
from vllm_sim.versions import Dialect, dialect_for

if TYPE_CHECKING:  # the engine core unpickles a SimConfig: it needs none of the command line's parser
    from vllm_flags.schema import VllmSchema


class StartupRefused(Exception):
    """vLLM would refuse this configuration before starting the engine: `lines` go to stderr."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines[-1])
        self.lines = lines


@dataclass(frozen=True, slots=True)
class SimConfig:
    version: str
    model: str
    served_names: tuple[str, ...]
    host: str | None
    port: int
    tp: int
    util: float
    gpu_total_gib: float
    gpu_free_gib: float | None
    weights_gib: float | None
    kv_bytes_per_token: int | None
    kv_cache_dtype: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    prefix_caching: bool
    enforce_eager: bool
    graphs: cudagraph.GraphPlan
    spec_method: str | None
    spec_tokens: int
    reasoning: bool
    reasoning_parser: str | None
    tool_parser: str | None
    auto_tools: bool
    api_keys: tuple[str, ...]
    log_stats: bool
    shutdown_timeout: float
    access_log: bool
    access_log_skip: tuple[str, ...]
    prompt_tokens_details: bool
    force_include_usage: bool
    request_id_headers: bool
    ground_truth: str | None
    timing: Timing
    faults: Faults
    shown_args: dict[str, Any] = field(default_factory=dict)
    runner: str = "V2"  # the model runner vLLM picks (0.26: V1 for ngram drafting)
    # (parser kind, exception line) that 0.26's setup_server raises after the banner and args
    refusal: tuple[str, str] | None = None
    kv_cache_memory_bytes: int | None = None  # `--kv-cache-memory-bytes`: no profiling, this KV size
    rounded: cudagraph.GraphPlan | None = None  # what the runner captures (the config line shows `graphs`)
    sleep_mode: bool = False  # `--enable-sleep-mode`: weights and KV cache in the CuMem pool
    dev_mode: bool = False  # VLLM_SERVER_DEV_MODE=1: the dev routes (/sleep, /wake_up, ...)
    keep_alive_s: float = 5.0  # VLLM_HTTP_TIMEOUT_KEEP_ALIVE: uvicorn closes a connection idle this long
    h11_max_event_bytes: int = 4194304  # `--h11-max-incomplete-event-size`: a longer request head is a 400
    gpu_set: str | None = None  # `--sim-gpu-set`: the simulated GPU set the ranks hold memory on
    gpu_devices: tuple[int, ...] = ()  # with it: each rank's device index in the set

    @property
    def captured(self) -> cudagraph.GraphPlan:
        """The graphs the model runner captures (the config line shows `graphs`)."""
        return self.rounded if self.rounded is not None else self.graphs

    @property
    def model_label(self) -> str:
        """The name clients must send and metrics carry: the first served name (vllm-facts.md §7)."""
        return self.faults.serve_model_name or self.served_names[0]

    @property
    def card_names(self) -> tuple[str, ...]:
        if self.faults.serve_model_name:
            return (self.faults.serve_model_name,)
        return self.served_names

    def memory(self) -> MemoryPlan:
        graphs = len(self.captured.piecewise_sizes) + len(self.captured.full_sizes)
        return plan_memory(
            model=self.model,
            total_gib=self.gpu_total_gib,
            free_gib=self.gpu_free_gib,
            util=self.util,
            tp=self.tp,
            weights_override=self.weights_gib,
            bytes_per_token_override=self.kv_bytes_per_token,
            kv_dtype=self.kv_cache_dtype,
            mnbt=self.max_num_batched_tokens,
            graphs=graphs,
            block_size=self.block_size,
            max_model_len=self.max_model_len,
            kv_bytes=self.kv_cache_memory_bytes,
        )


def _get(ns: argparse.Namespace, name: str, default: Any = None) -> Any:
    value = getattr(ns, name, None)
    return default if value is None else value


def _json(value: Any) -> dict[str, Any]:
    if value is None or isinstance(value, dict):
        return value or {}
    try:
        loaded = json.loads(str(value))
    except ValueError as err:
        raise StartupRefused([f"vllm: error: argument value is not valid JSON: {value!r}"]) from err
    return loaded if isinstance(loaded, dict) else {}


def _int(value: Any) -> int:
    from vllm_sim.serve_args import human_int

    return value if isinstance(value, int) else human_int(str(value))


@dataclass(frozen=True, slots=True)
class _Batch:
    """The scheduler's limits: vLLM's GPU-dependent defaults (vllm-facts.md §9), or the flags."""

    max_num_batched_tokens: int
    max_num_seqs: int


@dataclass(frozen=True, slots=True)
class _Parsers:
    tool_parser: str | None
    auto_tools: bool
    reasoning_parser: str | None
    refusal: tuple[str, str] | None  # (parser kind, exception line) that 0.26 raises after its banner


def _batch(ns: argparse.Namespace) -> _Batch:
    """1024 sequences and 8192 batched tokens from 70 GiB on (16384 from 160), 256 and 2048 below;
    `--performance-mode throughput` doubles both; max_num_seqs never exceeds the batched tokens."""
    total = float(ns.sim_gpu_memory_gib)
    mnbt_default = 16384 if total >= 160 else 8192 if total >= 70 else 2048
    seqs_default = 1024 if total >= 70 else 256
    if _get(ns, "performance_mode") == "throughput":
        mnbt_default, seqs_default = mnbt_default * 2, seqs_default * 2
    mnbt = _int(_get(ns, "max_num_batched_tokens", mnbt_default))
    return _Batch(mnbt, int(_get(ns, "max_num_seqs", min(seqs_default, mnbt))))


def _max_model_len(ns: argparse.Namespace, env: dict[str, str]) -> int:
    """The model's own length unless asked; longer only with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."""
    model_max = int(ns.sim_model_max_len)
    max_len = _int(_get(ns, "max_model_len", model_max))
    if max_len == -1:
        return model_max
    if max_len > model_max and env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
        raise StartupRefused(
            [
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                f"  Value error, User-specified max_model_len ({max_len}) is greater than the derived "
                f"max_model_len (max_position_embeddings={model_max} or model_max_length=None in "
                "model's config.json). To allow overriding this maximum, set the env var "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
                "extreme caution.",
            ]
        )
    return max_len


def _spec(ns: argparse.Namespace) -> tuple[str | None, int]:
    """The drafting method and its token count, from --speculative-config or the short flags."""
    spec = _json(_get(ns, "speculative_config"))
    method = spec.get("method") or _get(ns, "spec_method")
    tokens = spec.get("num_speculative_tokens") or _get(ns, "spec_tokens", 1 if method else 0)
    return method, int(tokens)


def _parsers(ns: argparse.Namespace, dialect: Dialect) -> _Parsers:
    """Tool and reasoning parsers as vLLM checks them (vllm-facts.md §5.5): 0.33 refuses an unknown
    one before its banner; 0.26 after it (the refusal rides on the config, announce prints it)."""
    tool_parser = _get(ns, "tool_call_parser")
    auto_tools = bool(_get(ns, "enable_auto_tool_choice", False))
    if auto_tools and not tool_parser:
        raise StartupRefused(["TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"])
    tools_known, reasoning_known = parsers_for(ns.sim_vllm_version)
    reasoning_parser = _get(ns, "reasoning_parser")
    refusal = None
    if auto_tools and tool_parser not in tools_known:
        refusal = ("tool call", unknown_parser_error("tool call", tool_parser, tools_known))
    elif reasoning_parser and reasoning_parser not in reasoning_known:
        line = (
            unknown_reasoning_026(reasoning_parser)
            if dialect.real_frames
            else unknown_parser_error("reasoning", reasoning_parser, reasoning_known)
        )
        refusal = ("reasoning", line)
    if refusal and not dialect.real_frames:
        raise StartupRefused([refusal[1]])
    return _Parsers(tool_parser, auto_tools, reasoning_parser, refusal)


def _graphs(ns: argparse.Namespace, batch: _Batch, spec_tokens: int, faults: Faults) -> cudagraph.GraphPlan:
    """The capture plan by the shared rule, then what the capture faults make of it."""
    sizes = _get(ns, "cudagraph_capture_sizes")
    try:
        graphs = cudagraph.plan_graphs(
            optimization_level=int(_get(ns, "optimization_level", 2)),
            compilation_config=_json(_get(ns, "compilation_config")),
            enforce_eager=bool(_get(ns, "enforce_eager", False)),
            max_num_seqs=batch.max_num_seqs,
            max_num_batched_tokens=batch.max_num_batched_tokens,
            spec_tokens=spec_tokens,
            performance_mode=_get(ns, "performance_mode"),
            user_sizes=[int(s) for s in sizes] if sizes else None,
            user_max=_get(ns, "max_cudagraph_capture_size"),
        )
    except cudagraph.GraphConfigError as err:
        raise StartupRefused([f"ValueError: {err}"]) from err
    if faults.capture_fallback and graphs.sizes:
        graphs = cudagraph.fallback_plan(graphs)
    if faults.eager_fallback and graphs.mode != cudagraph.GraphMode.NONE:
        graphs = cudagraph.eager_plan(graphs)
    return graphs


def _dev_mode(env: dict[str, str]) -> bool:
    """vLLM reads `bool(int(VLLM_SERVER_DEV_MODE))` (0.26.0 envs.py:1349)."""
    return bool(_env_int(env, "VLLM_SERVER_DEV_MODE", 0))


def _env_int(env: dict[str, str], name: str, default: int) -> int:
    """A variable vLLM reads with `int(...)` (0.26.0 envs.py): a non-integer stops it."""
    try:
        return int(env.get(name, str(default)))
    except ValueError as err:
        raise StartupRefused([f"ValueError: {err}"]) from err


def _gpu_set(ns: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """`--sim-gpu-set`: each rank's device of the set, whose total replaces `--sim-gpu-memory-gib`
    (and whose holders, at device init, `--sim-free-memory-gib`)."""
    directory = ns.sim_gpu_set or None
    if directory is None:
        return {}
    from vllm_sim.gpu_set import GpuSetRefused, rank_devices

    try:
        devices, total_gib = rank_devices(
            directory, env.get("CUDA_VISIBLE_DEVICES"), int(_get(ns, "tensor_parallel_size", 1))
        )
    except GpuSetRefused as err:
        raise StartupRefused([f"vllm: error: {err}"]) from None
    ns.sim_gpu_memory_gib, ns.sim_free_memory_gib = total_gib, None
    return {"gpu_set": directory, "gpu_devices": devices}


def _check_speeds(ns: argparse.Namespace) -> None:
    if ns.sim_speed <= 0 or (ns.sim_startup_speed is not None and ns.sim_startup_speed <= 0):
        raise StartupRefused(["vllm: error: --sim-speed and --sim-startup-speed must be > 0"])


def _as_tuple(value: Any) -> tuple[str, ...]:
    return tuple(value if isinstance(value, list) else [value])


def _frontend(ns: argparse.Namespace, env: dict[str, str], model: str) -> dict[str, Any]:
    """The API server's settings: names, keys (`--api-key`, else VLLM_API_KEY), logs, usage."""
    keys = _get(ns, "api_key") or ([env["VLLM_API_KEY"]] if env.get("VLLM_API_KEY") else [])
    skip = str(_get(ns, "disable_access_log_for_endpoints", ""))
    return {
        "served_names": _as_tuple(_get(ns, "served_model_name") or [model]),
        "host": _get(ns, "host"),
        "port": int(_get(ns, "port", 8000)),
        "api_keys": _as_tuple(keys),
        "log_stats": not _get(ns, "disable_log_stats", False),
        "shutdown_timeout": float(_get(ns, "shutdown_timeout", 0)),
        "access_log": not _get(ns, "disable_uvicorn_access_log", False),
        "access_log_skip": tuple(p for p in skip.split(",") if p),
        "prompt_tokens_details": bool(_get(ns, "enable_prompt_tokens_details", False)),
        "force_include_usage": bool(_get(ns, "enable_force_include_usage", False)),
        "request_id_headers": bool(_get(ns, "enable_request_id_headers", False)),
        "dev_mode": _dev_mode(env),
        "keep_alive_s": float(_env_int(env, "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", 5)),
        "h11_max_event_bytes": int(_get(ns, "h11_max_incomplete_event_size", 4194304)),
    }


def _engine(ns: argparse.Namespace, dialect: Dialect, batch: _Batch) -> dict[str, Any]:
    """The engine's memory and cache settings, as given or vLLM's defaults."""
    kv_bytes = _get(ns, "kv_cache_memory_bytes")
    return {
        "tp": int(_get(ns, "tensor_parallel_size", 1)),
        "util": float(_get(ns, "gpu_memory_utilization", dialect.default_util)),
        "gpu_total_gib": float(ns.sim_gpu_memory_gib),
        "gpu_free_gib": ns.sim_free_memory_gib,
        "weights_gib": ns.sim_weights_gib,
        "kv_bytes_per_token": ns.sim_kv_bytes_per_token,
        "kv_cache_dtype": str(_get(ns, "kv_cache_dtype", "auto")),
        "max_num_seqs": batch.max_num_seqs,
        "max_num_batched_tokens": batch.max_num_batched_tokens,
        "block_size": int(_get(ns, "block_size", 16)),
        "prefix_caching": bool(_get(ns, "enable_prefix_caching", True)),
        "enforce_eager": bool(_get(ns, "enforce_eager", False)),
        "sleep_mode": bool(_get(ns, "enable_sleep_mode", False)),
        "kv_cache_memory_bytes": _int(kv_bytes) if kv_bytes else None,
    }


def from_namespace(
    ns: argparse.Namespace, schema: VllmSchema, environ: dict[str, str] | None = None
) -> SimConfig:
    """Every decision in the order vLLM takes it; the first refusal raises `StartupRefused`."""
    from vllm_sim.serve_args import given_args

    env = dict(os.environ) if environ is None else environ
    dialect = dialect_for(ns.sim_vllm_version)
    model = ns.model_tag or _get(ns, "model") or "Qwen/Qwen3-8B"
    gpu_set = _gpu_set(ns, env)
    batch = _batch(ns)
    max_len = _max_model_len(ns, env)
    spec_method, spec_tokens = _spec(ns)
    parsers = _parsers(ns, dialect)
    faults = faults_from(ns)
    graphs = _graphs(ns, batch, spec_tokens, faults)
    runner = dialect.runner_for(spec_method)
    _check_speeds(ns)
    return SimConfig(
        version=ns.sim_vllm_version,
        model=model,
        max_model_len=max_len,
        graphs=graphs,
        spec_method=spec_method,
        spec_tokens=spec_tokens,
        reasoning=bool(parsers.reasoning_parser) or bool(ns.sim_reasoning),
        reasoning_parser=parsers.reasoning_parser,
        tool_parser=parsers.tool_parser,
        auto_tools=parsers.auto_tools,
        ground_truth=ns.sim_ground_truth,
        timing=timing_from(ns),
        faults=faults,
        shown_args=given_args(ns, schema),
        runner=runner,
        rounded=cudagraph.for_runner(graphs, runner, 1 + spec_tokens),
        refusal=parsers.refusal,
        **_frontend(ns, env, model),
        **_engine(ns, dialect, batch),
        **gpu_set,
    )
