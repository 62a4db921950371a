"""Checks of what the flags mean together (each documented in docs/profiles.md as error or warning)."""

from __future__ import annotations

import json
from typing import Any

from gates.cudagraph_sizes import CaptureConfig, decode_reachable, expected_capture_sizes
from launcher.profile.findings import Findings, where
from launcher.profile.loader import ResolvedProfile


def capture_config(args: dict[str, Any]) -> CaptureConfig:
    """What the profile's `[args]` say about CUDA graphs, in vLLM's terms."""
    norm = {k.replace("-", "_"): v for k, v in args.items()}
    compilation = _as_dict(norm.get("compilation_config"))
    sizes = compilation.get("cudagraph_capture_sizes", norm.get("cudagraph_capture_sizes"))
    max_size = compilation.get("max_cudagraph_capture_size", norm.get("max_cudagraph_capture_size"))
    spec = _as_dict(norm.get("speculative_config"))
    spec_tokens = spec.get("num_speculative_tokens", norm.get("spec_tokens", 0))
    return CaptureConfig(
        sizes=tuple(int(s) for s in sizes) if isinstance(sizes, list) else None,
        max_capture_size=human_int(max_size),
        max_num_seqs=human_int(norm.get("max_num_seqs")),
        max_num_batched_tokens=human_int(norm.get("max_num_batched_tokens")),
        num_speculative_tokens=int(spec_tokens) if isinstance(spec_tokens, int) else 0,
        enforce_eager=norm.get("enforce_eager") is True,
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
    if "api_key" in norm:
        findings.error(
            f"{here('api_key')}: a literal API key in a profile; set engine.api_key_env to a variable NAME"
        )
    _check_capture(profile, args, norm, findings, here)


def _check_capture(
    profile: ResolvedProfile, args: dict[str, Any], norm: dict[str, Any], findings: Findings, here: Any
) -> None:
    try:
        config = capture_config(args)
    except (TypeError, ValueError):
        return  # malformed values were already reported by the renderer
    if config.enforce_eager and (config.sizes is not None or config.max_capture_size is not None):
        findings.error(
            f"{here('enforce_eager')}: enforce_eager = true disables CUDA graphs, "
            "yet capture sizes are set — "
            "contradictory; drop one"
        )
        return
    if config.sizes is None:
        return
    kept = expected_capture_sizes(config) or []
    asked = sorted(set(config.sizes))
    key = "compilation_config" if "compilation_config" in norm else "cudagraph_capture_sizes"
    cap = config.max_num_batched_tokens
    above = [s for s in asked if cap is not None and s > cap]
    if above:
        findings.warn(
            f"{here(key)}: capture sizes {above} exceed max_num_batched_tokens={cap}; vLLM drops them"
        )
    if config.decode_query_len > 1 and kept != [s for s in asked if s not in above]:
        findings.warn(
            f"{here(key)}: with {config.num_speculative_tokens} speculative token(s) vLLM rounds "
            f"capture sizes up to multiples of {config.decode_query_len}: "
            f"it will capture {kept} ({len(kept)} sizes), not {asked}"
        )
    _, unused = decode_reachable(kept, config)
    if unused:
        findings.warn(
            f"{here(key)}: capture sizes {unused} are never used — a decode batch holds at most "
            f"max_num_seqs × {config.decode_query_len} = "
            f"{config.max_num_seqs * config.decode_query_len} tokens"
            if config.max_num_seqs is not None
            else f"{here(key)}: capture sizes {unused} are never used"
        )


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
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
