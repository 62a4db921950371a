"""The `vllm serve` command line, rebuilt from the option schema so the simulator accepts what vLLM does.

Like vLLM's `FlexibleArgumentParser`: `_` or `-` in flag names, `-O3` for `--optimization-level 3`,
dotted JSON flags (`-cc.cudagraph_mode=FULL`), unknown flags fail with usage, exit 2 and
`vllm: error: unrecognized arguments: ...` (vllm-facts.md §5.6, §9). `--config FILE.yaml` is not supported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from vllm_flags.schema import OptionSpec, VllmSchema
from vllm_flags.sim_flags import SIM_FLAGS, env_default

_DOTTED = re.compile(r"^(--?[A-Za-z0-9][\w-]*)\.([\w.]+?)(\+)?(?:=(.*))?$", re.DOTALL)
_OPT_LEVEL = re.compile(r"^-O=?(\d)$")
_HUMAN = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgG])$")
_UNITS = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3, "G": 1024**3}


class SimArgumentError(Exception):
    """A bad value the parser could not catch itself (e.g. a malformed VLLM_SIM_* variable)."""


def human_int(text: str) -> int:
    """`8192`, `8k` (8000) or `8K` (8192), as vLLM's human-readable ints."""
    match = _HUMAN.match(text)
    if match:
        return int(float(match.group(1)) * _UNITS[match.group(2)])
    return int(text)


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid bool value: {text!r}")


_TYPES: dict[str, Any] = {"int": int, "float": float, "bool": _bool, "human_int": human_int}


def _add_option(group: argparse._ArgumentGroup, spec: OptionSpec, names: list[str]) -> None:
    if spec.kind == "flag":
        group.add_argument(
            *names, dest=spec.dest, action="store_const", const=bool(spec.sets), default=argparse.SUPPRESS
        )
        return
    kwargs: dict[str, Any] = {"dest": spec.dest, "default": argparse.SUPPRESS}
    if spec.type in _TYPES:
        kwargs["type"] = _TYPES[spec.type]
    if spec.nargs is not None:
        kwargs["nargs"] = spec.nargs
    if spec.choices is not None:
        kwargs["choices"] = list(spec.choices)
    group.add_argument(*names, **kwargs)


def build_parser(schema: VllmSchema) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="vllm")
    top.add_argument("-v", "--version", action="store_true", help="show the simulated vLLM version")
    subs = top.add_subparsers(dest="subparser")
    serve = subs.add_parser("serve", prog="vllm serve", help="start the simulated OpenAI-compatible server")
    serve.add_argument("model_tag", nargs="?", default=None, help="the model to serve")
    groups: dict[str, argparse._ArgumentGroup] = {}
    seen: set[str] = set()
    by_shape: dict[tuple[str, str, bool | None], list[OptionSpec]] = {}
    for spec in schema.options.values():
        if spec.option in ("-h", "--help"):
            continue
        by_shape.setdefault((spec.dest, spec.kind, spec.sets), []).append(spec)
    for specs in by_shape.values():
        names = [s.option for s in specs if s.option not in seen]
        if not names:
            continue
        seen.update(names)
        group_name = specs[0].group or "options"
        if group_name not in groups:
            groups[group_name] = serve.add_argument_group(group_name)
        _add_option(groups[group_name], specs[0], names)
    sim = serve.add_argument_group("Simulator", "vllm-sim only; each flag also reads VLLM_SIM_<NAME>")
    for flag in SIM_FLAGS:
        if flag.type == "flag":
            sim.add_argument(flag.option, dest=flag.dest, action="store_true", default=None, help=flag.help)
        else:
            sim.add_argument(
                flag.option,
                dest=flag.dest,
                type=_TYPES.get(flag.type, str),
                default=None,
                choices=list(flag.choices) if flag.choices else None,
                help=flag.help,
            )
    return top


def normalize_argv(argv: Sequence[str], schema: VllmSchema) -> list[str]:
    """Rewrite vLLM's flexible spellings into plain argparse ones."""
    out: list[str] = []
    dotted: dict[str, dict[str, Any]] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        level = _optimization_level(arg, schema)
        if level is not None:
            out += level
            continue
        spelled = _spelled(arg)
        match = _dotted_json(spelled, schema)
        if match is not None:
            i = _take_dotted(match, args, i, dotted)
        else:
            out.append(spelled)
    for option, tree in dotted.items():
        out += [option, json.dumps(tree)]
    return out


def _optimization_level(arg: str, schema: VllmSchema) -> list[str] | None:
    """`-O3`, `-O=3` and `-O 3`: vLLM's short spellings of --optimization-level (where -O is no flag)."""
    if "-O" in schema.options:
        return None
    level = _OPT_LEVEL.match(arg)
    if level:
        return ["--optimization-level", level.group(1)]
    return ["--optimization-level"] if arg == "-O" else None


def _spelled(arg: str) -> str:
    """A long option's name with `_` as `-` (`--max_num_seqs=4`), up to a dotted key; else `arg`."""
    if not arg.startswith("--") or arg == "--":
        return arg
    name, eq, value = arg.partition("=")
    head, dot, rest = name.partition(".")
    return head.replace("_", "-") + dot + rest + eq + value


def _dotted_json(spelled: str, schema: VllmSchema) -> re.Match[str] | None:
    """`-cc.cudagraph_mode=FULL`, `--compilation-config.max_cudagraph_capture_size 8`: one key of a
    JSON option, set on its own."""
    if spelled.startswith("--") and "." not in spelled.partition("=")[0]:
        return None
    match = _DOTTED.match(spelled)
    return match if match and _is_json(schema, match.group(1)) else None


def _is_json(schema: VllmSchema, option: str) -> bool:
    spec = schema.options.get(option)
    return spec is not None and spec.type == "json"


def _take_dotted(match: re.Match[str], args: list[str], i: int, dotted: dict[str, dict[str, Any]]) -> int:
    option, path, append, value = match.group(1), match.group(2), match.group(3), match.group(4)
    if value is None and i < len(args):
        value, i = args[i], i + 1
    node = dotted.setdefault(option, {})
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    parsed: Any = _json_or_text(value or "")
    if append:
        items = [_json_or_text(v) for v in str(value).split(",")]
        node[keys[-1]] = list(node.get(keys[-1], [])) + items
    else:
        node[keys[-1]] = parsed
    return i


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse(
    argv: Sequence[str], schema: VllmSchema, environ: dict[str, str] | None = None
) -> argparse.Namespace:
    """Parse `vllm serve ...` argv; sim flags left unset take `VLLM_SIM_*` or their defaults."""
    parser = build_parser(schema)
    ns = parser.parse_args(normalize_argv(argv, schema))
    env = dict(os.environ) if environ is None else environ
    for flag in SIM_FLAGS:
        if getattr(ns, flag.dest, None) is None:
            try:
                setattr(ns, flag.dest, env_default(flag, env))
            except ValueError as err:
                raise SimArgumentError(f"{flag.env}={env.get(flag.env)!r}: {err}") from err
    return ns


def given_args(ns: argparse.Namespace, schema: VllmSchema) -> dict[str, Any]:
    """The vLLM (not sim) args given on the command line, as `non-default args:` shows them."""
    order = {spec.dest: i for i, spec in enumerate(schema.options.values())}
    sim = {flag.dest for flag in SIM_FLAGS}
    items = [(k, v) for k, v in vars(ns).items() if k in order and k not in sim]
    items.sort(key=lambda kv: order[kv[0]])
    shown: dict[str, Any] = {}
    if ns.model_tag is not None:
        shown["model_tag"] = ns.model_tag
    model_added = False
    for key, value in items:
        group = schema.options[_first_option(schema, key)].group
        if not model_added and group == "ModelConfig" and ns.model_tag is not None:
            shown["model"] = ns.model_tag
            model_added = True
        shown[key] = "***" if key in ("api_key", "hf_token") else value
    if not model_added and ns.model_tag is not None:
        shown["model"] = ns.model_tag
    return shown


def _first_option(schema: VllmSchema, dest: str) -> str:
    return next(o for o, s in schema.options.items() if s.dest == dest)
