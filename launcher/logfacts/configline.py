"""Facts stated by the engine config line, the args vLLM echoes, or a command line the log shows.

Each function returns only the keys its text states; the collector ranks the sources
(engine config > args > command line), because the config line is what vLLM actually built.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from launcher.logfacts import patterns as p
from launcher.logfacts.pyrepr import value_after


def from_engine_config(cfg: str) -> dict[str, Any]:
    """`model='Qwen/Qwen3-8B', ..., tensor_parallel_size=1, ..., compilation_config={...}` (core.py:139)."""
    return {**_config_scalars(cfg), **_config_graphs(cfg)}


def _config_scalars(cfg: str) -> dict[str, Any]:
    """The model, the int fields, enforce_eager and the word fields the config line states."""
    out: dict[str, Any] = {}
    m = p.CFG_MODEL.search(cfg)
    if m:
        out["model"] = m.group("model")
    for key, rx in p.CFG_INT.items():
        m = rx.search(cfg)
        if m:
            out[key] = int(m.group("v"))
    m = p.CFG_EAGER.search(cfg)
    if m:
        out["enforce_eager"] = m.group("v") == "True"
    for key, rx in p.CFG_WORD.items():
        m = rx.search(cfg)
        if m and m.group("v") != "None":
            out[key] = [m.group("v")] if key == "served_model_name" else m.group("v")
    return out


def _config_graphs(cfg: str) -> dict[str, Any]:
    """What the config line says of speculative decoding and CUDA graphs: mode, sizes, largest size."""
    out: dict[str, Any] = {}
    spec = value_after(cfg, "speculative_config") if p.CFG_SPECULATIVE.search(cfg) else None
    if spec and spec != "None":
        out["speculative_config"] = spec
    mode = cudagraph_mode(cfg)
    if mode is not None:
        out["cudagraph_mode"] = mode
    m = p.CFG_SIZES.search(cfg)
    if m:
        out["capture_sizes"] = sorted(int(s) for s in re.findall(r"\d+", m.group("sizes")))
    m = p.CFG_MAX_SIZE.search(cfg)
    if m:
        out["max_capture_size"] = int(m.group("n"))
    return out


def cudagraph_mode(cfg: str) -> str | None:
    m = p.CFG_CG_MODE.search(cfg)
    if m is None:
        return None
    if m.group("none"):
        return "NONE"
    if m.group("name") or m.group("quoted"):
        return (m.group("name") or m.group("quoted")).upper()
    values = ",".join(re.findall(r"\d+", m.group("tuple")))
    return p.CG_MODE_VALUES.get(values)


_ARG_KEYS = {
    "model": "model",
    "port": "served_port",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "max_model_len": "max_model_len",
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "enforce_eager": "enforce_eager",
    "kv_cache_dtype": "kv_cache_dtype",
    "quantization": "quantization",
    "speculative_config": "speculative_config",
    "tool_call_parser": "tool_call_parser",
    "served_model_name": "served_model_name",
}
_TYPES: dict[str, type] = {
    "served_port": int,
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "data_parallel_size": int,
    "max_model_len": int,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "gpu_memory_utilization": float,
    "enforce_eager": bool,
    "model": str,
    "kv_cache_dtype": str,
    "quantization": str,
    "tool_call_parser": str,
}


def from_args(args: dict[str, Any]) -> dict[str, Any]:
    """`non-default args: {...}` (0.33 startup.py:96) or old `args: Namespace(...)`: typed, Nones dropped."""
    out: dict[str, Any] = {}
    for key, fact in _ARG_KEYS.items():
        value = args.get(key)
        typed = None if value is None or value == "***" else _typed(fact, value)
        if typed is not None:
            out[fact] = typed
    if "model" not in out and isinstance(args.get("model_tag"), str):
        out["model"] = args["model_tag"]
    return out


def _typed(fact: str, value: Any) -> Any:
    """The value as the fact's type (an int where a float is due becomes one); None where it is not."""
    if fact == "served_model_name":
        return [str(v) for v in (value if isinstance(value, list) else [value])]
    if fact == "speculative_config" or _is_type(value, _TYPES[fact]):
        return value
    if _TYPES[fact] is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return None


_SECRET_KEYS = ("api_key", "token", "secret", "password")


def redact(args: dict[str, Any]) -> dict[str, Any]:
    """vLLM prints `'api_key': ['sk-…']` in clear (0.26.0, recorded): the facts never carry it. A key is
    secret when it is, or ends in `_` and, a secret word (`hf_token`); one that only contains the word
    (`max_num_batched_tokens`, `tokenizer`) is a setting and stays readable."""
    return {k: ("***" if _is_secret(k) and v else v) for k, v in args.items()}


def _is_secret(key: str) -> bool:
    return any(key == s or key.endswith("_" + s) for s in _SECRET_KEYS)


def _is_type(value: Any, kind: type) -> bool:
    """`True` is an int to Python, not to us."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


_FLAGS = {
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
    "--data-parallel-size": "data_parallel_size",
    "-dp": "data_parallel_size",
    "--port": "served_port",
    "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_num_seqs",
    "--gpu-memory-utilization": "gpu_memory_utilization",
}


def from_command(args_text: str) -> dict[str, Any]:
    """`vllm serve MODEL --tensor-parallel-size 4 --port 8100 ...` echoed by a shell or a unit file."""
    try:
        words = shlex.split(args_text)
    except ValueError:
        words = args_text.split()
    out: dict[str, Any] = {}
    for i, word in enumerate(words):
        flag, _, inline = word.partition("=")
        fact = _FLAGS.get(flag.replace("_", "-")) if flag.startswith("-") else None
        if fact is not None:
            out.update(_number(fact, inline or (words[i + 1] if i + 1 < len(words) else "")))
        else:
            out.update(_word_fact(words, i, flag, inline))
    return out


def _number(fact: str, value: str) -> dict[str, Any]:
    try:
        return {fact: float(value) if fact == "gpu_memory_utilization" else int(value)}
    except ValueError:
        return {}


def _word_fact(words: list[str], i: int, flag: str, inline: str) -> dict[str, Any]:
    """A word that is no numeric flag: `--enforce-eager`, `--model M`, or the model as the first word."""
    if words[i] == "--enforce-eager":
        return {"enforce_eager": True}
    if flag == "--model" and (inline or i + 1 < len(words)):
        return {"model": inline or words[i + 1]}  # `-m vllm.entrypoints.openai.api_server --model M`
    if i == 0 and not words[i].startswith("-"):
        return {"model": words[i]}
    return {}
