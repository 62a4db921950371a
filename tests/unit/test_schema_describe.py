"""The first step of the flag schema (vllm_flags/schema_extract.py) on a real argparse parser built
here the way vLLM builds `vllm serve`'s: what each action is recorded as, what a bare flag really
stores, how a wrapped type is named and then classified, and that the record is plain, stable data.
vLLM itself is not needed; its own parser is checked against the snapshot in test_vllm_schema.py."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from enum import Enum
from typing import Any

from vllm_flags import schema_extract


def optional_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    """The shape of vLLM's arg_utils.optional_type: a closure around the field's type."""

    def _optional_type(val: str) -> Any:
        return None if val in ("", "None") else return_type(val)

    return _optional_type


def parse_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    def _parse_type(val: str) -> Any:
        return return_type(val)

    return _parse_type


class Device(Enum):
    CUDA = "cuda"


class StoresOnlyWithAValue(argparse.Action):
    """An action that cannot run on a bare namespace (a fork's own class, say)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        raise TypeError("needs a value")


def vllm_like_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm serve")
    model = parser.add_argument_group("ModelConfig")
    model.add_argument("--max-model-len", type=optional_type(int), default=None)
    model.add_argument("--enforce-eager", action="store_true")
    model.add_argument("--dtype", choices=["auto", "half", "bfloat16"], default="auto")
    model.add_argument("--hf-overrides", type=parse_type(json.loads), default={})
    cache = parser.add_argument_group("CacheConfig")
    cache.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    cache.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    cache.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--disable-log-stats", action="store_false", dest="log_stats")
    parser.add_argument("--device", default=Device.CUDA, choices={"cuda", "cpu", "tpu"})
    parser.add_argument("--served-model-name", nargs="+", type=str, default=None)
    parser.add_argument("--device-ids", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--fork-flag", action=StoresOnlyWithAValue, nargs=0)
    return parser


def described(parser: argparse.ArgumentParser, deprecated: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {
        option: schema_extract._describe_action(parser, option, action, option in deprecated)
        for option, action in parser._option_string_actions.items()
    }


def raw_dump(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """What `raw_dump_from_vllm` would record, for this parser."""
    return {
        "format": schema_extract.RAW_FORMAT,
        "vllm_version": "0.0.test",
        "builder": "tests.vllm_like_parser",
        "prog": "vllm serve",
        "actions": described(parser),
        "env_vars": ["VLLM_USE_V2_MODEL_RUNNER", "CUDA_VISIBLE_DEVICES"],
        "tool_parsers": ["hermes", "granite"],
    }


def test_every_option_string_is_recorded_with_its_dest_and_group() -> None:
    actions = described(vllm_like_parser())
    assert "--no-enable-prefix-caching" in actions and "-h" in actions and "--help" in actions
    assert actions["--max-model-len"]["group"] == "ModelConfig"
    assert actions["--gpu-memory-utilization"]["group"] == "CacheConfig"
    assert actions["--disable-log-stats"]["dest"] == "log_stats"
    assert actions["--no-enable-prefix-caching"]["dest"] == "enable_prefix_caching"


def test_a_bare_flag_records_what_it_really_stores() -> None:
    actions = described(vllm_like_parser())
    assert actions["--enforce-eager"]["stores"] is True
    assert actions["--disable-log-stats"]["stores"] is False, "store_false: the flag turns stats off"
    assert actions["--enable-prefix-caching"]["stores"] is True
    assert actions["--no-enable-prefix-caching"]["stores"] is False, "the hidden negative form"
    assert actions["--help"]["stores"] is None, "help is never run to see what it stores"
    assert actions["--fork-flag"]["stores"] is None, "an action that needs more than a namespace"
    assert actions["--dtype"]["stores"] is None, "a value option stores what it is given"


def test_a_wrapped_type_is_named_with_what_it_wraps_and_classified_by_it() -> None:
    actions = described(vllm_like_parser())
    named = actions["--max-model-len"]["type"]
    assert named.endswith("optional_type.<locals>._optional_type(int)")
    assert schema_extract.type_kind(named) == "int"
    hf = actions["--hf-overrides"]["type"]
    assert hf.endswith("parse_type.<locals>._parse_type(json.loads)")
    assert schema_extract.type_kind(hf) == "json"
    assert schema_extract.type_kind(actions["--device-ids"]["type"]) == "other", "a lambda: nothing known"
    assert actions["--kv-cache-dtype"]["type"] is None and schema_extract.type_kind(None) == "str"


def test_defaults_and_choices_are_plain_deterministic_data() -> None:
    actions = described(vllm_like_parser())
    assert actions["--device"]["default"] == f"<{__name__}.Device>", "an object: its type, never a repr"
    assert actions["--device"]["choices"] == ["cpu", "cuda", "tpu"], "a set, in a stable order"
    assert actions["--dtype"]["choices"] == ["auto", "half", "bfloat16"], "a list keeps its order"
    assert actions["--hf-overrides"]["default"] == {}
    assert actions["--served-model-name"]["nargs"] == "+"
    assert json.loads(schema_extract.dumps({"a": actions})) == {"a": actions}
    assert schema_extract._plain({3, 1, 2}) == [1, 2, 3]
    assert schema_extract._plain((1, [2, {"k": Device.CUDA}])) == [1, [2, {"k": f"<{__name__}.Device>"}]]


def test_a_deprecated_option_is_marked() -> None:
    actions = described(vllm_like_parser(), deprecated=frozenset({"--disable-log-stats"}))
    assert actions["--disable-log-stats"]["deprecated"] is True
    assert actions["--enforce-eager"]["deprecated"] is False


def test_the_snapshot_of_this_parser_is_what_a_validator_needs() -> None:
    snapshot = schema_extract.normalize(raw_dump(vllm_like_parser()))
    options = snapshot["options"]
    assert list(options) == sorted(options)
    assert options["--enforce-eager"] == {
        "dest": "enforce_eager", "kind": "flag", "type": None, "nargs": None, "choices": None,
        "group": "ModelConfig", "sets": True,
    }  # fmt: skip
    assert options["--max-model-len"]["kind"] == "value" and options["--max-model-len"]["type"] == "int"
    assert options["--help"]["kind"] == "flag" and options["--help"]["sets"] is None
    assert options["--gpu-memory-utilization"]["type"] == "float"
    assert snapshot["env_vars"] == ["CUDA_VISIBLE_DEVICES", "VLLM_USE_V2_MODEL_RUNNER"]
    assert snapshot["tool_parsers"] == ["granite", "hermes"]
    assert snapshot["source"]["option_count"] == len(options) and snapshot["source"]["wheel"] is None


def test_the_snapshot_is_byte_stable_and_leaves_out_an_unknown_tool_parser_list() -> None:
    raw = raw_dump(vllm_like_parser())
    first = schema_extract.dumps(schema_extract.normalize(raw))
    assert first == schema_extract.dumps(schema_extract.normalize(json.loads(json.dumps(raw))))
    raw["tool_parsers"] = None
    assert "tool_parsers" not in schema_extract.normalize(raw)
