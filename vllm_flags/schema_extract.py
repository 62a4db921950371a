"""Read `vllm serve`'s option table out of the installed vLLM, and boil it down to the snapshot format.

Two steps, so the committed snapshot can be rebuilt and checked without vLLM: `raw_dump_from_vllm`
records what argparse holds (it imports vLLM and torch); `normalize` is a pure function of that record.
This module itself imports fine without vLLM.

Why the parser and not vLLM's docs: argparse accepts abbreviations, so "it parsed" proves nothing;
the exact option strings in `parser._option_string_actions` are the only list that is complete,
including the hidden `--no-enable-x` forms that vLLM's `EnableDisableAction` still accepts (0.33.0).
"""

from __future__ import annotations

import json
import re
from typing import Any

RAW_FORMAT = 1
SNAPSHOT_FORMAT = 1
PROG = "vllm serve"

# The wrappers vLLM's arg_utils puts around a field's real type (0.33.0: `optional_type`, `parse_type`).
_OPTIONAL = "optional_type.<locals>._optional_type"  # "" and "None" become None
_WRAPPERS = (_OPTIONAL, "parse_type.<locals>._parse_type")
# What each parser callable takes, by the tail of its qualified name.
_TYPE_KINDS = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "json.loads": "json",
    "parse_dataclass": "json",  # a config dataclass given as JSON (`--compilation-config`)
    "union_dict_and_str": "json",  # a JSON object or a plain string (`--hf-overrides`)
    "human_readable_int": "human_int",
    "human_readable_int_or_auto": "human_int",
    "parse_reasoning_parser": "str",  # a name; only maps "none" to ""
}


def dumps(data: dict[str, Any]) -> str:
    """The one serialization of raw dumps and snapshots: sorted keys, so the files are byte-stable."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- the raw dump (needs vLLM) -------------------------------------------------------------


def schema_from_installed_vllm() -> dict[str, Any]:
    """The snapshot-format schema of the vLLM importable here (what `schema_source.load_installed` reads)."""
    return normalize(raw_dump_from_vllm())


def raw_dump_from_vllm() -> dict[str, Any]:
    """Every entry of the installed vLLM's `vllm serve` parser, as plain data."""
    import vllm
    import vllm.envs

    platform = _platform_name()
    parser, builder = _build_parser()
    deprecated: set[Any] = getattr(parser, "_deprecated", set())  # FlexibleArgumentParser, Python < 3.13
    actions = {
        option: _describe_action(parser, option, action, action in deprecated)
        for option, action in parser._option_string_actions.items()
    }
    return {
        "format": RAW_FORMAT,
        "vllm_version": str(vllm.__version__),
        "torch_version": _torch_version(),
        "python": _python_version(),
        "builder": builder,
        "prog": PROG,
        "platform": platform,
        "actions": actions,
        "env_vars": sorted(vllm.envs.environment_variables),
        "tool_parsers": _registered(
            "ToolParserManager", "vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers"
        ),
        "reasoning_parsers": _registered("ReasoningParserManager", "vllm.reasoning"),
    }


def _platform_name() -> str:
    """The platform vLLM detects; CPU where it detects none, since config defaults need a device."""
    import vllm.platforms as platforms

    current = platforms.current_platform
    if current.is_unspecified():
        # No GPU and a CUDA wheel: vLLM would fail in DeviceConfig ("Failed to infer device type").
        # Setting the private slot keeps VLLM_TARGET_DEVICE out of the caller's environment.
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()
        current = platforms.current_platform
    return f"{type(current).__module__}.{type(current).__qualname__}"


def _build_parser() -> tuple[Any, str]:
    """The parser `vllm serve` builds: `make_arg_parser` on a FlexibleArgumentParser.

    vLLM 0.33.0 reads `sys.argv` while adding options (`serve --help` drops `--model`), so the
    build runs under a neutral argv: the result must not depend on who calls this.
    """
    import sys

    # The modules moved between releases: 0.33 first, then where 0.26 keeps them.
    make_arg_parser = _first_attr(
        "make_arg_parser", "vllm.entrypoints.common.cli_args", "vllm.entrypoints.openai.cli_args"
    )
    FlexibleArgumentParser = _first_attr(  # noqa: N806 - a class
        "FlexibleArgumentParser", "vllm.utils.argparse_utils", "vllm.utils"
    )

    builder = f"{make_arg_parser.__module__}.{make_arg_parser.__qualname__}"
    saved, sys.argv = sys.argv, [PROG]
    try:
        return make_arg_parser(FlexibleArgumentParser(prog=PROG)), builder
    finally:
        sys.argv = saved


def _registered(manager_name: str, *modules: str) -> list[str] | None:
    """The names `--tool-call-parser` (`ToolParserManager`) or `--reasoning-parser`
    (`ReasoningParserManager`) accepts: vLLM checks them only at start, after its imports (26 s on
    the GPU machine), so the launcher checks them before stopping anything."""
    try:
        manager = _first_attr(manager_name, *modules)
        return sorted(str(name) for name in manager.list_registered())
    except Exception:  # an older or patched vLLM: the names stay unknown, nothing is checked
        return None


def _first_attr(name: str, *modules: str) -> Any:
    import importlib

    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"{name} not found in {', '.join(modules)}")


def _describe_action(parser: Any, option: str, action: Any, deprecated: bool) -> dict[str, Any]:
    import argparse

    container = getattr(action, "container", None)
    mro = [c.__name__ for c in type(action).__mro__ if issubclass(c, argparse.Action)]
    described: dict[str, Any] = {
        "dest": action.dest,
        "action": type(action).__name__,
        "action_mro": mro,
        "nargs": action.nargs,
        "type": _callable_name(action.type),
        "choices": _choices(action.choices),
        "metavar": _plain(action.metavar),
        "const": _plain(action.const),
        "default": _plain(action.default),
        "required": bool(action.required),
        "deprecated": bool(deprecated or getattr(action, "deprecated", False)),
        "group": getattr(container, "title", None),
        "stores": None,
    }
    if action.nargs == 0 and not isinstance(action, argparse._HelpAction | argparse._VersionAction):
        described["stores"] = _stored_by(parser, option, action)
    return described


def _stored_by(parser: Any, option: str, action: Any) -> Any:
    """Run a no-value action on an empty namespace: what the bare option really stores.

    Asking the action beats re-deriving its rule: a fork's own action classes answer too.
    """
    import argparse

    namespace = argparse.Namespace()
    try:
        action(parser, namespace, None, option)
    except Exception:  # an action that needs more than a namespace: its flag gets `sets` null
        return None
    return _plain(getattr(namespace, action.dest, None))


def _callable_name(fn: Any, depth: int = 0) -> str | None:
    """A stable name for a type callable; a closure names what it wraps: `..._optional_type(int)`."""
    if fn is None:
        return None
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    name = qualname if module == "builtins" else f"{module}.{qualname}"
    inner = [_callable_name(v, depth + 1) for v in _captured(fn)] if depth < 4 else []
    return f"{name}({', '.join(n for n in inner if n)})" if inner else name


def _captured(fn: Any) -> list[Any]:
    """Callables a parser function closes over or takes as a default (`cls=CompilationConfig`)."""
    cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()]
    defaults = list(getattr(fn, "__defaults__", None) or ())
    return [v for v in cells + defaults if callable(v)]


def _choices(choices: Any) -> list[str] | None:
    if choices is None:
        return None
    values = sorted(choices, key=str) if isinstance(choices, set | frozenset) else list(choices)
    return [str(v) for v in values]


def _plain(value: Any) -> Any:
    """JSON-safe and deterministic: scalars as they are, containers of them, else the type's name."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=str)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    kind = type(value)
    return f"<{kind.__module__}.{kind.__qualname__}>"  # no repr: reprs carry addresses and set order


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


def _python_version() -> str:
    import platform

    return platform.python_version()


# --- normalization (pure) ------------------------------------------------------------------


def normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """The snapshot (`schema.py`'s format 1) from a raw dump. Pure: no vLLM, no I/O.

    Help (`-h`, `--help`) stays in, as kind "flag" with `sets` null, so the snapshot's option
    strings are exactly the parser's; a validator must refuse a flag whose `sets` is null.
    """
    options = {option: _normalize_action(a) for option, a in raw["actions"].items()}
    wheel = raw.get("wheel") or {}
    return {
        "format": SNAPSHOT_FORMAT,
        "vllm_version": raw["vllm_version"],
        "source": {
            "package": "vllm",
            "vllm_version": raw["vllm_version"],
            "wheel": wheel.get("filename"),
            "wheel_sha256": wheel.get("sha256"),
            "torch_version": raw.get("torch_version"),
            "python": raw.get("python"),
            "builder": raw["builder"],
            "prog": raw.get("prog"),
            "platform": raw.get("platform"),
            "option_count": len(options),
        },
        "options": dict(sorted(options.items())),
        "env_vars": sorted(raw["env_vars"]),
        **({"tool_parsers": sorted(raw["tool_parsers"])} if raw.get("tool_parsers") else {}),
        **({"reasoning_parsers": sorted(raw["reasoning_parsers"])} if raw.get("reasoning_parsers") else {}),
    }


def _normalize_action(action: dict[str, Any]) -> dict[str, Any]:
    is_flag = action["nargs"] == 0
    stores = action.get("stores")
    listed = None if is_flag else metavar_choices(action)
    return {
        "dest": action["dest"],
        "kind": "flag" if is_flag else "value",
        "type": None if is_flag else type_kind(action["type"]),
        "nargs": None if is_flag else action["nargs"],
        "choices": action["choices"],
        "group": action["group"],
        "sets": stores if is_flag and isinstance(stores, bool) else None,
        **({"metavar_choices": listed} if listed is not None else {}),
    }


def metavar_choices(action: dict[str, Any]) -> list[str] | None:
    """The values vLLM lists only in the metavar: a `Literal` field whose type also allows `str` gets
    `metavar=sorted(values)` instead of `choices` (vllm-facts.md §9.1), so argparse takes any string
    and a name outside the list fails later, after vLLM's imports. An optional field also takes
    "None", as vLLM appends it to real choices. A metavar that is one word (`{a,b}` of
    `--tool-call-parser`, a placeholder) is not such a list."""
    metavar = action.get("metavar")
    if action.get("choices") is not None or not isinstance(metavar, list) or not metavar:
        return None
    values = [str(v) for v in metavar]
    optional = _base(action.get("type") or "").endswith(_OPTIONAL)
    return values + ["None"] if optional and "None" not in values else values


def type_kind(type_name: str | None) -> str:
    """int | float | str | json | bool | human_int | other, from a raw dump's type name.

    No type means argparse hands the string through. "json" includes `union_dict_and_str`, which
    also takes a plain string. Lambdas (`--device-ids`, `--moe-backend` in 0.33.0) and any callable
    not listed here are "other": nothing is known about what they accept.
    """
    if type_name is None:
        return "str"
    name = _unwrap(type_name)
    for tail, kind in _TYPE_KINDS.items():
        if name == tail or name.endswith("." + tail) or _base(name).endswith("." + tail):
            return kind
    return "other"


def _unwrap(type_name: str) -> str:
    """`...optional_type.<locals>._optional_type(int)` → `int`, through any depth of wrappers."""
    match = re.fullmatch(r"(?P<outer>[^()]+)\((?P<inner>.*)\)", type_name)
    if match and match["outer"].endswith(_WRAPPERS):
        return _unwrap(match["inner"])
    return type_name


def _base(name: str) -> str:
    """The callable's own name without what it captured: `...parse_dataclass(Cls)` → `...parse_dataclass`."""
    return name.split("(", 1)[0]
