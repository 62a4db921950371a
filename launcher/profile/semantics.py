"""Checks of what the flags mean together (each documented in docs/profiles.md as error or warning)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from basis.setting import SettingValues
from launcher.profile import bounds
from launcher.profile.findings import Findings, where
from launcher.profile.keys import SUPERVISOR, engine_settings
from launcher.profile.loader import ResolvedProfile
from launcher.profile.render import DEV_MODE_VAR
from vllm_flags.cudagraph_sizes import (
    DEFAULT_MAX_NUM_SEQS_FLOOR,
    CaptureConfig,
    decode_reachable,
    expected_capture_sizes,
    expected_graphs,
    graph_ceiling_seqs,
    runner_from_env,
)

# vLLM 0.26.0: the V1 runner rounds every size (config/compilation.py:1465), V2 only its FULL decode
# graphs (v1/worker/gpu/cudagraph_utils.py:224).
_ROUNDS = {"V1": "every size", "V2": "its FULL decode graphs only"}


def capture_config(args: dict[str, Any], env: dict[str, Any] | None = None) -> CaptureConfig:
    """What the profile's `[args]` (and `[env]`: VLLM_USE_V2_MODEL_RUNNER) say about CUDA graphs."""
    norm = {k.replace("-", "_"): v for k, v in args.items()}
    compilation = _as_dict(norm.get("compilation_config"))
    sizes = compilation.get("cudagraph_capture_sizes", norm.get("cudagraph_capture_sizes"))
    max_size = compilation.get("max_cudagraph_capture_size", norm.get("max_cudagraph_capture_size"))
    spec = _as_dict(norm.get("speculative_config"))
    spec_tokens = spec.get("num_speculative_tokens", norm.get("spec_tokens", 0))
    method = spec.get("method", norm.get("spec_method"))
    if method is None and spec.get("model") is not None:  # vLLM infers it (config/speculative.py:680)
        method = "ngram" if spec["model"] in ("ngram", "[ngram]") else "draft_model"
    mode = compilation.get("cudagraph_mode")
    forced = (env or {}).get("VLLM_USE_V2_MODEL_RUNNER")
    return CaptureConfig(
        sizes=tuple(int(s) for s in sizes) if isinstance(sizes, list) else None,
        max_capture_size=human_int(max_size),
        max_num_seqs=human_int(norm.get("max_num_seqs")),
        max_num_batched_tokens=human_int(norm.get("max_num_batched_tokens")),
        num_speculative_tokens=int(spec_tokens) if isinstance(spec_tokens, int) else 0,
        enforce_eager=norm.get("enforce_eager") is True,
        spec_method=str(method) if method else None,
        cudagraph_mode=str(mode) if isinstance(mode, str) else None,
        runner=runner_from_env(str(forced)) if forced is not None else None,
    )


def check_semantics(profile: ResolvedProfile, findings: Findings) -> None:
    args = profile.data.get("args", {})
    if not isinstance(args, dict):
        return
    norm = {k.replace("-", "_"): (k, v) for k, v in args.items()}

    def here(key: str) -> str:
        original = norm[key][0]
        return where(profile.source_of(f"args.{original}"), f"args.{original}")

    util = norm.get("gpu_memory_utilization", (None, None))[1]
    if isinstance(util, int | float) and not isinstance(util, bool) and not 0 < util <= 1:
        findings.error(
            f"{here('gpu_memory_utilization')} = {util}: must be in (0, 1] (a fraction of GPU memory)"
        )
    if norm.get("disable_log_stats", (None, False))[1] is True:
        findings.error(
            f"{here('disable_log_stats')}: refused — it removes vLLM's /metrics (vllm:*) and stats lines, "
            "which the gates need"
        )
    env = profile.data.get("env", {})
    _check_capture(profile, args, norm, findings, here, env if isinstance(env, dict) else {})
    check_park(profile, norm, env if isinstance(env, dict) else {}, findings)
    check_trial(profile, findings)


LOOPBACK_NAMES = frozenset({"localhost", "::1"})
SWITCH_FIELDS = frozenset({"profile", "host", "port", "url"})


def is_loopback(host: str) -> bool:
    """`localhost`, or a loopback IP address: a host name that merely starts with `127.`
    (`127.evil.example`) resolves wherever its DNS says."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_park(
    profile: ResolvedProfile, norm: dict[str, tuple[str, Any]], env: dict[str, Any], findings: Findings
) -> None:
    """`park = "sleep"` runs vLLM with its dev-mode routes (/sleep, /wake_up, /collective_rpc, …),
    which no API key guards: only on loopback, behind a proxy, with a second port to alternate to."""
    supervisor = profile.data.get("supervisor", {})
    supervisor = supervisor if isinstance(supervisor, dict) else {}
    _check_switch(profile, supervisor.get("on_switch"), findings)
    if SettingValues.of(SUPERVISOR, supervisor).text("park") != "sleep":
        _check_dev_mode(profile, env, findings)
        _check_unused_park_keys(profile, supervisor, norm, env, findings)
        return
    engine = engine_settings(profile.data)
    host, port = engine.text("host"), engine.value("port")
    at = where(profile.source_of("supervisor.park"), "supervisor.park")
    if not is_loopback(host):
        findings.error(
            f'{at} = "sleep" with engine.host = {host!r}: sleep mode needs vLLM\'s dev-mode routes, which '
            "anyone who reaches the port can call unauthenticated (/sleep, /wake_up, /collective_rpc); "
            'bind 127.0.0.1 and put a proxy in front (docs/park.md), or park = "stop"'
        )
    park_port = supervisor.get("park_port")
    if not isinstance(park_port, int) or isinstance(park_port, bool):
        findings.error(
            f'{at} = "sleep" needs supervisor.park_port: the port the candidate starts on '
            "while the sleeper keeps engine.port (docs/park.md)"
        )
    elif park_port == port:
        findings.error(f"supervisor.park_port = {park_port} is engine.port: the two must differ")
    if norm.get("enable_sleep_mode", (None, None))[1] is False:
        findings.error(f'{at} = "sleep" with args.enable_sleep_mode = false: they contradict each other')
    if str(env.get("VLLM_SERVER_DEV_MODE", "1")) != "1":
        findings.error(
            f'{at} = "sleep" with env.VLLM_SERVER_DEV_MODE = {env["VLLM_SERVER_DEV_MODE"]!r}: '
            "the sleep routes exist only in dev mode"
        )


def dev_mode_on(env: dict[str, Any]) -> bool:
    """vLLM reads VLLM_SERVER_DEV_MODE as `bool(int(…))` (vllm-facts.md §12)."""
    try:
        return int(str(env.get(DEV_MODE_VAR, "0")).strip()) != 0
    except ValueError:
        return False


def _check_dev_mode(profile: ResolvedProfile, env: dict[str, Any], findings: Findings) -> None:
    """Dev mode without park: its routes answer whoever reaches the port, and the API key guards only
    /v1, /v2, /inference and /cohere (vllm-facts.md §7): /collective_rpc calls any worker method.
    (With park = "sleep", check_park refuses a host that is not loopback already.)"""
    host = engine_settings(profile.data).text("host")
    if not dev_mode_on(env) or is_loopback(host):
        return
    at = where(profile.source_of(f"env.{DEV_MODE_VAR}"), f"env.{DEV_MODE_VAR}")
    findings.error(
        f"{at} = {env[DEV_MODE_VAR]!r} with engine.host = {host!r}: vLLM's dev routes (/sleep, /wake_up, "
        "/collective_rpc, /reset_prefix_cache) answer anyone who reaches the port, and no API key guards "
        "them; bind a loopback host and put a proxy in front (docs/park.md), or leave dev mode off"
    )


def _check_unused_park_keys(
    profile: ResolvedProfile,
    supervisor: dict[str, Any],
    norm: dict[str, tuple[str, Any]],
    env: dict[str, Any],
    findings: Findings,
) -> None:
    """keep_parked and park_port set where nothing parks: the operator meant something that will not
    happen (park_port is also trial = "beside"'s port; an engine can sleep only if started so)."""
    values = SettingValues.of(SUPERVISOR, supervisor)
    sleeps = norm.get("enable_sleep_mode", (None, None))[1] is True and dev_mode_on(env)
    if values.value("keep_parked") is True and not sleeps:
        at = where(profile.source_of("supervisor.keep_parked"), "supervisor.keep_parked")
        findings.warn(f'{at} has no effect without supervisor.park = "sleep": no engine is kept asleep')
    if values.value("park_port") is not None and values.text("trial") != "beside":
        at = where(profile.source_of("supervisor.park_port"), "supervisor.park_port")
        findings.warn(
            f'{at} has no effect without supervisor.park = "sleep" or supervisor.trial = "beside": '
            "every change starts on engine.port"
        )


def check_trial(profile: ResolvedProfile, findings: Findings) -> None:
    """`trial = "beside"` starts the candidate on the second port while production serves: it needs
    that port, and a front door or an on_switch hook to move the clients once it passed."""
    supervisor = profile.data.get("supervisor", {})
    supervisor = supervisor if isinstance(supervisor, dict) else {}
    values = SettingValues.of(SUPERVISOR, supervisor)
    at = where(profile.source_of("supervisor.trial"), "supervisor.trial")
    if values.text("trial") != "beside":
        if values.value("power_limit_w") is not None:
            power_at = where(profile.source_of("supervisor.power_limit_w"), "supervisor.power_limit_w")
            findings.warn(f'{power_at} has no effect without supervisor.trial = "beside"')
        return
    park_port = supervisor.get("park_port")
    if values.text("park") == "sleep":
        pass  # check_park has judged park_port already
    elif not isinstance(park_port, int) or isinstance(park_port, bool):
        findings.error(
            f'{at} = "beside" needs supervisor.park_port: the port the candidate starts on while '
            "production keeps engine.port (docs/park.md)"
        )
    elif park_port == engine_settings(profile.data).value("port"):
        findings.error(f"supervisor.park_port = {park_port} is engine.port: the two must differ")
    door = profile.data.get("frontdoor")
    if not (isinstance(door, dict) and door.get("port") is not None) and not supervisor.get("on_switch"):
        findings.error(
            f'{at} = "beside" needs [frontdoor] port (or supervisor.on_switch): clients must be moved '
            "to the candidate once it passed, and production keeps serving them until then"
        )


def _check_switch(profile: ResolvedProfile, command: Any, findings: Findings) -> None:
    if not isinstance(command, list):
        return  # absent, or the type check of the declaration reports it
    at = where(profile.source_of("supervisor.on_switch"), "supervisor.on_switch")
    if not command:
        findings.error(f"{at} is empty: a command and its arguments, or leave it out")
    for item in command:
        for name in re.findall(r"\{([^{}]*)\}", str(item)):
            if name not in SWITCH_FIELDS:
                findings.error(
                    f"{at}: unknown placeholder {{{name}}} (known: {', '.join(sorted(SWITCH_FIELDS))})"
                )


def _check_capture(
    profile: ResolvedProfile,
    args: dict[str, Any],
    norm: dict[str, Any],
    findings: Findings,
    here: Any,
    env: dict[str, Any],
) -> None:
    try:
        config = capture_config(args, env)
    except (TypeError, ValueError):
        return  # malformed values were already reported by the renderer
    if config.enforce_eager and (config.sizes is not None or config.max_capture_size is not None):
        findings.error(
            f"{here('enforce_eager')}: enforce_eager = true disables CUDA graphs, "
            "yet capture sizes are set — "
            "contradictory; drop one"
        )
        return
    _check_graph_ceiling(config, findings, here, norm)
    if config.sizes is not None:
        at = here("compilation_config" if "compilation_config" in norm else "cudagraph_capture_sizes")
        for warning in capture_size_warnings(config, config.sizes):
            findings.warn(f"{at}: {warning}")


def capture_size_warnings(config: CaptureConfig, sizes: tuple[int, ...]) -> list[str]:
    """What vLLM will do to the capture sizes asked for: drop those above the token budget, round
    them for speculative decoding, and never use those no decode batch reaches."""
    kept = expected_capture_sizes(config) or []
    asked = sorted(set(sizes))
    within, above = _split_at_budget(asked, config.max_num_batched_tokens)
    dropped = f"capture sizes {above} exceed max_num_batched_tokens={config.max_num_batched_tokens}"
    warnings = [
        f"{dropped}; vLLM drops them" if above else None,
        _rounding_warning(config, kept, asked, within),
        _unused_warning(config, kept),
    ]
    return [w for w in warnings if w]


def _split_at_budget(asked: list[int], max_num_batched_tokens: int | None) -> tuple[list[int], list[int]]:
    """(the sizes vLLM keeps, those above max_num_batched_tokens, which it drops)."""
    if max_num_batched_tokens is None:
        return asked, []
    return [s for s in asked if s <= max_num_batched_tokens], [s for s in asked if s > max_num_batched_tokens]


def _rounding_warning(
    config: CaptureConfig, kept: list[int], asked: list[int], within: list[int]
) -> str | None:
    """Speculative decoding rounds the sizes up to multiples of its decode query length: what it
    captures then, where that differs from the sizes within the token budget."""
    graphs = expected_graphs(config) or {}
    rewritten = any(v != kept for v in graphs.values()) or kept != within
    if config.decode_query_len <= 1 or not rewritten:
        return None
    per_mode = ", ".join(f"{mode} {sizes} ({len(sizes)} graphs)" for mode, sizes in graphs.items())
    return (
        f"with {config.num_speculative_tokens} speculative token(s) the {config.model_runner} model "
        f"runner rounds capture sizes up to multiples of {config.decode_query_len} "
        f"({_ROUNDS[config.model_runner]}): it will capture {per_mode} from the sizes {asked}"
    )


def _unused_warning(config: CaptureConfig, kept: list[int]) -> str | None:
    """Sizes above the largest decode batch (max_num_seqs × the decode query length) never run."""
    _, unused = decode_reachable(kept, config)
    if not unused:
        return None
    if config.max_num_seqs is None:
        return f"capture sizes {unused} are never used"
    return (
        f"capture sizes {unused} are never used — a decode batch holds at most max_num_seqs × "
        f"{config.decode_query_len} = {config.max_num_seqs * config.decode_query_len} tokens"
    )


def _check_graph_ceiling(config: CaptureConfig, findings: Findings, here: Any, norm: dict[str, Any]) -> None:
    """Speculative decoding can leave the largest graph below max_num_seqs decode sequences: vLLM
    0.26.0 with ngram k=2 and sizes [1, 2, 4, 8] captured [3, 6], so beyond 2 sequences decode ran
    without graphs."""
    graphs = expected_graphs(config)
    if config.decode_query_len <= 1 or not graphs:
        return
    ceiling = graph_ceiling_seqs(graphs, config.decode_query_len)
    seqs = config.max_num_seqs or DEFAULT_MAX_NUM_SEQS_FLOOR
    if ceiling >= seqs:
        return
    named = (
        f"max_num_seqs = {seqs}" if config.max_num_seqs else f"vLLM's default max_num_seqs, ≥ {seqs} on a GPU"
    )
    key = next((k for k in ("speculative_config", "spec_tokens", "max_num_seqs") if k in norm), None)
    where_ = here(key) if key else "args"
    findings.warn(
        f"{where_}: with {config.num_speculative_tokens} speculative token(s) the {config.model_runner} "
        f"model runner captures graphs for decode batches of at most {ceiling} sequence(s) "
        f"({ceiling * config.decode_query_len} tokens): above {ceiling} sequences decode runs without "
        f"CUDA graphs ({named})"
    )


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = bounds.loads_json(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def human_int(value: Any) -> int | None:
    """vLLM's human-readable ints: 16384, "16k", "16K" (k = 1000, K = 1024), "1m"."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        units = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3, "G": 1024**3}
        if text and text[-1] in units:
            try:
                return int(float(text[:-1]) * units[text[-1]])
            except ValueError:
                return None
        return int(text) if text.isdigit() else None
    return None
